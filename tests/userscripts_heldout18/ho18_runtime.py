"""Small runtime helpers shared by the ho18 training scripts.

Keeps the boilerplate (seeding, output folders, process-group bring-up)
out of the individual trainers.
"""
from __future__ import annotations

import logging
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

PG_TIMEOUT = timedelta(seconds=30)


@dataclass(frozen=True)
class DistInfo:
    rank: int
    world_size: int
    local_rank: int

    @property
    def tag(self) -> str:
        return f"r{self.rank}/{self.world_size}"


def output_dir(name: str, reset: bool = True) -> Path:
    """Return /tmp/ho18_<name>/, wiped at start-up.

    Called by every rank *before* the process group exists; the rendezvous
    inside init_process_group orders all resets before any rank writes.
    """
    path = Path("/tmp") / f"ho18_{name}"
    if reset:
        shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    return path


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def get_logger(name: str) -> logging.Logger:
    rank = os.environ.get("RANK", "?")
    logger = logging.getLogger(f"{name}.{rank}")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter(f"[%(asctime)s rank{rank} %(name)s] %(message)s", "%H:%M:%S"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


def init_distributed(backend: str = "gloo") -> DistInfo:
    torch.set_num_threads(1)
    if not dist.is_initialized():
        dist.init_process_group(backend=backend, timeout=PG_TIMEOUT)
    return DistInfo(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )


def shutdown_distributed() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.perf_counter()

    def lap(self) -> float:
        return time.perf_counter() - self.t0
