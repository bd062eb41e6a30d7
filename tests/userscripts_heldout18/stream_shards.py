"""Streaming regression over JSON-lines shard files.

Shard files are assigned round-robin to ranks and streamed through a
generator-backed IterableDataset, so nothing is held in memory.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Dict, Iterable, Iterator, List

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "stream_shards"
log = get_logger(NAME)

SHARD_SIZES = [64, 96, 64, 96, 48]   # records per shard file, as exported upstream
FEATURES = 10
SETTINGS = {"batch_size": 16, "epochs": 2, "lr": 0.02}


# ------------------------------------------------------------- shard prep ----
def export_shards(root: Path) -> List[Path]:
    g = torch.Generator().manual_seed(99)
    w = torch.randn(FEATURES, generator=g)
    paths = []
    for i, n in enumerate(SHARD_SIZES):
        p = root / f"part-{i:05d}.jsonl"
        with p.open("w") as fh:
            for _ in range(n):
                x = torch.randn(FEATURES, generator=g)
                y = float(x @ w + 0.05 * torch.randn((), generator=g))
                fh.write(json.dumps({"x": x.tolist(), "y": y}) + "\n")
        paths.append(p)
    return paths


# ------------------------------------------------------------- streaming ----
def read_jsonl(paths: Iterable[Path]) -> Iterator[Dict]:
    for p in paths:
        with p.open() as fh:
            for line in fh:
                yield json.loads(line)


def to_tensors(records: Iterator[Dict]) -> Iterator:
    for r in records:
        yield torch.tensor(r["x"]), torch.tensor([r["y"]])


class ShardStream(IterableDataset):
    def __init__(self, files: List[Path], rank: int, world: int):
        self.files = files[rank::world]

    def __iter__(self):
        return to_tensors(read_jsonl(self.files))


# ---------------------------------------------------------------- engine ----
def global_mean(loss_sum: float, count: int) -> float:
    t = torch.tensor([loss_sum, float(count)], dtype=torch.float64)
    dist.all_reduce(t)
    return (t[0] / t[1]).item()


class StreamEngine:
    def __init__(self, files: List[Path], rank: int, world: int):
        self.stream = ShardStream(files, rank, world)
        self.loader = DataLoader(self.stream, batch_size=SETTINGS["batch_size"])
        self.net = DDP(nn.Sequential(nn.Linear(FEATURES, 32), nn.SiLU(), nn.Linear(32, 1)))
        self.opt = torch.optim.SGD(self.net.parameters(), lr=SETTINGS["lr"], momentum=0.9)

    def epoch(self) -> float:
        loss_sum, count, steps = 0.0, 0, 0
        for xb, yb in self.loader:
            self.opt.zero_grad()
            loss = nn.functional.mse_loss(self.net(xb), yb)
            loss.backward()
            self.opt.step()
            loss_sum += loss.item() * len(xb)
            count += len(xb)
            steps += 1
        log.info("local steps this epoch: %d", steps)
        return global_mean(loss_sum, count)


def main():
    out = output_dir(NAME)
    info = init_distributed()
    seed_everything(5)
    shard_dir = out / "shards"
    prep_rank = int(os.environ.get("LOCAL_WORLD_SIZE", "1")) - 1
    if info.rank == prep_rank:
        shard_dir.mkdir()
        export_shards(shard_dir)
    dist.barrier()
    files = sorted(shard_dir.glob("part-*.jsonl"))
    engine = StreamEngine(files, info.rank, info.world_size)
    for ep in range(SETTINGS["epochs"]):
        log.info("epoch %d global mse %.4f", ep, engine.epoch())
    shutdown_distributed()


if __name__ == "__main__":
    main()
