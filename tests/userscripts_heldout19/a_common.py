"""Small shared bits for the a_* training scripts: output folder, logging, process-group setup."""
import faulthandler
import logging
import os
import shutil
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

PG_TIMEOUT = timedelta(seconds=30)


def run_dir(name):
    return os.path.join("/tmp", f"ho19_{name}")


def get_logger(name, rank):
    log = logging.getLogger(name)
    if not log.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter(f"%(asctime)s [rank{rank}] %(levelname)s %(message)s", "%H:%M:%S"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def setup(name, watchdog_s=150, seed=0):
    """Arm the hang watchdog, join the default group, prepare /tmp/ho19_<name>."""
    faulthandler.dump_traceback_later(watchdog_s, exit=True)
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    out = run_dir(name)
    if os.environ.get("LOCAL_RANK", "0") == "0":
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out, exist_ok=True)
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    dist.barrier()
    return dist.get_rank(), dist.get_world_size(), out


def teardown():
    dist.barrier()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()
