"""Sequence regressor on variable-length synthetic recordings, DDP on CPU (gloo).

Recordings are decoded lazily and memoised so that epochs after the first are fast.
The cluster enforces a per-task RSS limit (cgroup); `MemoryGuard` applies the same
limit locally so a job that would be OOM-killed there is killed the same way here.
"""
import argparse
import os
import signal
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * PAGE / 2**20


class MemoryGuard(threading.Thread):
    """Same policy as the scheduler's cgroup: over the limit -> SIGKILL, no traceback."""

    def __init__(self, limit_mb: float, interval: float = 0.05):
        super().__init__(daemon=True)
        self.limit_mb, self.interval = limit_mb, interval

    def run(self):
        while True:
            if rss_mb() > self.limit_mb:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(self.interval)


class Recordings(Dataset):
    """Recording i has `length(i)` frames of 32 features; later recordings are the long-form ones."""

    def __init__(self, n: int, frames_short: int = 16, frames_long: int = 8192):
        self.n, self.frames_short, self.frames_long = n, frames_short, frames_long
        self._cache = {}

    def length(self, i):
        return self.frames_long if i >= self.n // 2 else self.frames_short

    def _decode(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(self.length(i), 32, generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i not in self._cache:
            self._cache[i] = self._decode(i)
        frames = self._cache[i]
        x = torch.cat([frames.mean(0), frames.std(0)])
        y = frames[:, 0].abs().mean().unsqueeze(0)
        return x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--samples", type=int, default=2048)
    p.add_argument("--mem-limit-mb", type=float, default=float(os.environ.get("TASK_MEM_LIMIT_MB", 1024)))
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    MemoryGuard(args.mem_limit_mb).start()

    ds = Recordings(args.samples)
    # contiguous shards keep each rank's recordings on the same (local) disk
    per = len(ds) // world
    shard = list(range(rank * per, (rank + 1) * per))
    loader = DataLoader(torch.utils.data.Subset(ds, shard), batch_size=args.batch_size, shuffle=True)

    model = DDP(nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1)))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.MSELoss()

    for epoch in range(args.epochs):
        t0 = time.time()
        running = 0.0
        for step, (x, y) in enumerate(loader):
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            running += loss.item()
            if step % 10 == 0:
                print(f"rank {rank} epoch {epoch} step {step}/{len(loader)} loss {loss.item():.4f} rss {rss_mb():.0f} MB")
        print(f"rank {rank} Epoch {epoch} | Steps: {len(loader)} | loss {running / len(loader):.4f} | {time.time() - t0:.1f}s")

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
