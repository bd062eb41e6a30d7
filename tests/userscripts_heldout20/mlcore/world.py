"""Who am I in the job? A process-wide World object plus helpers."""
from __future__ import annotations

import contextlib
import functools
import os
from datetime import timedelta

import torch
import torch.distributed as dist

_WORLD = None


class World:
    def __init__(self, ordinal: int, size: int, local: int):
        self.ordinal, self.size, self.local = ordinal, size, local

    @classmethod
    def current(cls) -> "World":
        global _WORLD
        if _WORLD is None:
            _WORLD = cls(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                         int(os.environ.get("LOCAL_RANK", 0)))
        return _WORLD

    @property
    def coordinator(self) -> bool:
        return self.ordinal == 0

    @property
    def multi(self) -> bool:
        return self.size > 1 and dist.is_initialized()

    def barrier(self):
        if self.multi:
            dist.barrier()

    def tag(self) -> str:
        return f"w{self.ordinal}"


def is_primary() -> bool:
    return World.current().coordinator


def rank_zero_only(fn):
    """Run `fn` on the coordinator only; other processes get None."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if is_primary():
            return fn(*args, **kwargs)
        return None
    return wrapper


@contextlib.contextmanager
def world_session(backend: str = "gloo", timeout_s: int = 30, threads: int = 1):
    torch.set_num_threads(threads)
    dist.init_process_group(backend, timeout=timedelta(seconds=timeout_s))
    try:
        yield World.current()
        dist.barrier()  # nobody tears down while a peer is still talking to it
    finally:
        dist.destroy_process_group()
