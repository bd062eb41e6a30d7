"""Checkpoint helpers."""
from __future__ import annotations

import glob
import logging
import os
import time

import torch

log = logging.getLogger("projkit.ckpt")


def save_checkpoint(state: dict, path: str) -> None:
    """Write atomically: readers never observe a half-written file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save(state, tmp)
    os.replace(tmp, path)


def latest(directory: str):
    files = sorted(glob.glob(os.path.join(directory, "epoch*.pt")))
    return files[-1] if files else None


def prune(directory: str, keep_last: int) -> None:
    files = sorted(glob.glob(os.path.join(directory, "epoch*.pt")))
    for f in files[:-keep_last]:
        os.remove(f)


def load_checkpoint(path: str, map_location="cpu") -> dict:
    return torch.load(path, map_location=map_location, weights_only=False)


def publish_weights(state: dict, path: str) -> None:
    """Make weights available to the other workers of this job (shared filesystem)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    torch.save(state, path)
    log.info("published %s (%.1f MB)", path, os.path.getsize(path) / 2**20)


def wait_for_weights(path: str, poll_s: float = 0.05, timeout_s: float = 120.0) -> dict:
    """Block until `path` has been published, then load it."""
    deadline = time.monotonic() + timeout_s
    while not (os.path.exists(path) and os.path.getsize(path) > 0):
        if time.monotonic() > deadline:
            raise TimeoutError(f"weights never appeared at {path}")
        time.sleep(poll_s)
    return torch.load(path, map_location="cpu", weights_only=False)
