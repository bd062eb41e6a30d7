"""Saving a checkpoint safely vs plain torch.save, same state, same run.

``atomic_save``: temp file, flush, fsync, os.replace, fsync of the directory.  ``manager``: the same
plus a sha256 of the file and a manifest (also fsynced) and keep-last-K rotation.  The fsyncs make
the data durable before it becomes visible; their cost depends on the disk (page cache vs device).
"""
from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

TITLE = "Checkpoint save, 64 MiB state (seconds, median) vs plain torch.save"
SIZE_MB = 64


def rows(reps: int) -> list[dict]:
    import torch

    from nbhelpers.checkpoint import CheckpointManager, atomic_save

    n = SIZE_MB * 2**20 // 4 // 8
    state = {f"layer{i}.weight": torch.randn(n) for i in range(8)}
    d = Path(tempfile.mkdtemp(prefix="bench-ckpt-", dir="."))
    mgr = CheckpointManager(d / "mgr", keep=2)
    ways = {"torch.save": lambda k: torch.save(state, d / "plain.pt"),
            "atomic_save": lambda k: atomic_save(state, d / "atomic.pt"),
            "CheckpointManager.save": lambda k: mgr.save(state, k)}
    times: dict[str, list[float]] = {w: [] for w in ways}
    try:
        for k in range(reps):
            for w, fn in ways.items():  # interleaved: page cache and disk state alike for all
                t0 = time.perf_counter()
                fn(k)
                times[w].append(time.perf_counter() - t0)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    base = statistics.median(times["torch.save"])
    return [{"way": w, "median s": f"{statistics.median(t):.3f}", "min s": f"{min(t):.3f}",
             "ratio vs torch.save": f"{statistics.median(t) / base:.2f}"} for w, t in times.items()]
