"""Animal-sound classifier trained on records merged from two export sources.

Records are encoded lazily (feature scaling + label lookup) when a batch is
drawn. Each rank gets one contiguous block of the merged record list.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Dict, Iterator, List

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Sampler

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "label_map_prep"
log = get_logger(NAME)


@dataclass
class DataSpec:
    labels: tuple = ("bird", "cat", "dog", "frog")
    n_features: int = 16
    source_a: int = 600
    source_b: int = 120
    scale: float = 4.0


@dataclass
class FitSpec:
    batch: int = 24
    epochs: int = 2
    lr: float = 5e-3


def _sample(rng: random.Random, spec: DataSpec, label: str) -> List[float]:
    centre = spec.labels.index(label.strip().lower())
    return [rng.gauss(centre * (i % 3 - 1), 1.0) * spec.scale for i in range(spec.n_features)]


def export_source_a(spec: DataSpec) -> List[Dict]:
    rng = random.Random(1)
    out = []
    for _ in range(spec.source_a):
        lab = rng.choice(spec.labels)
        out.append({"x": _sample(rng, spec, lab), "label": lab, "src": "a"})
    return out


def export_source_b(spec: DataSpec) -> List[Dict]:
    # partner export: same schema, hand-labelled
    rng = random.Random(2)
    out = []
    for i in range(spec.source_b):
        lab = rng.choice(spec.labels)
        if i % 17 == 5:
            lab = lab.capitalize()
        out.append({"x": _sample(rng, spec, lab), "label": lab, "src": "b"})
    return out


class Encoder:
    def __init__(self, spec: DataSpec):
        self.label2id = {lab: i for i, lab in enumerate(spec.labels)}
        self.scale = spec.scale

    def __call__(self, rec: Dict):
        x = torch.tensor(rec["x"]) / self.scale
        return x, self.label2id[rec["label"]]


class RecordDataset(Dataset):
    def __init__(self, records: List[Dict], encode: Encoder):
        self.records, self.encode = records, encode

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        return self.encode(self.records[i])


class BlockSampler(Sampler[int]):
    """Contiguous block per rank, shuffled inside the block each epoch."""

    def __init__(self, n: int, rank: int, world: int, seed: int = 0):
        per = math.ceil(n / world)
        self.block = list(range(rank * per, min(n, (rank + 1) * per)))
        self.seed, self.epoch = seed, 0

    def set_epoch(self, e: int):
        self.epoch = e

    def __iter__(self) -> Iterator[int]:
        idx = self.block[:]
        random.Random(self.seed + self.epoch).shuffle(idx)
        return iter(idx)

    def __len__(self):
        return len(self.block)


class Fitter:
    def __init__(self, spec: DataSpec, fit: FitSpec, rank: int, world: int):
        self.fit_spec = fit
        merged = export_source_a(spec) + export_source_b(spec)
        self.ds = RecordDataset(merged, Encoder(spec))
        self.sampler = BlockSampler(len(self.ds), rank, world, seed=13)
        self.loader = DataLoader(self.ds, batch_size=fit.batch, sampler=self.sampler, num_workers=0)
        self.net = DDP(nn.Sequential(nn.Linear(spec.n_features, 64), nn.ReLU(), nn.Linear(64, len(spec.labels))))
        self.opt = torch.optim.Adam(self.net.parameters(), lr=fit.lr)

    def run(self):
        for ep in range(self.fit_spec.epochs):
            self.sampler.set_epoch(ep)
            seen, correct = torch.zeros(()), torch.zeros(())
            for step, (xb, yb) in enumerate(self.loader):
                self.opt.zero_grad()
                logits = self.net(xb)
                nn.functional.cross_entropy(logits, yb).backward()
                self.opt.step()
                seen += len(yb)
                correct += (logits.argmax(1) == yb).sum()
            stats = torch.stack([seen, correct])
            dist.all_reduce(stats)
            log.info("epoch %d train acc %.3f", ep, (stats[1] / stats[0]).item())


@record
def main():
    output_dir(NAME)
    info = init_distributed()
    seed_everything(4)
    Fitter(DataSpec(), FitSpec(), info.rank, info.world_size).run()
    shutdown_distributed()


if __name__ == "__main__":
    main()
