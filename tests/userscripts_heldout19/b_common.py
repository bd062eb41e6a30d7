"""Runtime helpers shared by the b_* training scripts (logging, seeding, process group, run folders)."""
import faulthandler
import logging
import os
import random
import shutil
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

PG_TIMEOUT = timedelta(seconds=30)


def env_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def arm_watchdog(seconds: float) -> None:
    """Hard stop for a job that stops making progress (dumps every thread's stack first)."""
    faulthandler.dump_traceback_later(seconds, exit=True)


def get_logger(name: str, rank: int) -> logging.Logger:
    log = logging.getLogger(name)
    if not log.handlers:
        h = logging.StreamHandler(sys.stdout)
        h.setFormatter(logging.Formatter(f"%(asctime)s [rank{rank}] %(levelname)s %(message)s", "%H:%M:%S"))
        log.addHandler(h)
        log.setLevel(logging.INFO)
        log.propagate = False
    return log


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def init_distributed():
    dist.init_process_group("gloo", timeout=PG_TIMEOUT)
    torch.set_num_threads(1)
    return dist.get_rank(), dist.get_world_size()


def run_dir(name: str) -> Path:
    return Path(f"/tmp/ho19_{name}")


def fresh_run_dir(name: str, rank: int) -> Path:
    """Rank 0 empties the run folder; everyone waits until it exists again."""
    out = run_dir(name)
    if rank == 0:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
    dist.barrier()
    return out


def shutdown() -> None:
    dist.barrier()
    dist.destroy_process_group()
