"""Wine classifier where a subset of ranks doubles as evaluators.

Evaluator ranks are picked by stride (every `eval_stride`-th rank) and
share a dedicated evaluation subgroup, created the first time it is needed
so that pure-training jobs never pay for it. End-of-run reports travel as
python objects over a gloo "control" group (the pattern used when the
default backend is NCCL).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import List

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_wine
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ho18_runtime import PG_TIMEOUT, get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "lazy_eval_group"
log = get_logger(NAME)


@dataclass
class JobCfg:
    epochs: int = 3
    batch: int = 16
    lr: float = 1e-2
    eval_stride: int = 2       # every 2nd rank evaluates


def wine_split(seed: int = 0):
    x, y = load_wine(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed))
    x, y = torch.tensor(x, dtype=torch.float32)[perm], torch.tensor(y)[perm]
    cut = int(0.8 * len(x))
    return TensorDataset(x[:cut], y[:cut]), TensorDataset(x[cut:], y[cut:])


class Evaluator:
    def __init__(self, cfg: JobCfg, val: TensorDataset, world: int):
        self.cfg, self.val = cfg, val
        self.ranks: List[int] = [r for r in range(world) if r % cfg.eval_stride == cfg.eval_stride - 1]

    @property
    def active(self) -> bool:
        return dist.get_rank() in self.ranks

    @cached_property
    def group(self):
        return dist.new_group(ranks=self.ranks, timeout=PG_TIMEOUT)

    @torch.no_grad()
    def __call__(self, model: nn.Module) -> float:
        pos = self.ranks.index(dist.get_rank())
        xv, yv = self.val[pos::len(self.ranks)]
        stats = torch.tensor([(model(xv).argmax(1) == yv).sum().item(), len(yv)], dtype=torch.float64)
        dist.all_reduce(stats, group=self.group)
        return (stats[0] / stats[1]).item()


class RunReport:
    def __init__(self):
        self.rows = []

    @cached_property
    def control_group(self):
        return dist.new_group(backend="gloo", timeout=PG_TIMEOUT)

    def add(self, **row):
        self.rows.append(row)

    def gather(self) -> list:
        out = [None] * dist.get_world_size()
        dist.all_gather_object(out, self.rows, group=self.control_group)
        return out


class Job:
    def __init__(self, cfg: JobCfg, world: int):
        self.cfg = cfg
        train, val = wine_split()
        self.sampler = DistributedSampler(train, seed=3)
        self.loader = DataLoader(train, batch_size=cfg.batch, sampler=self.sampler)
        self.model = DDP(nn.Sequential(nn.Linear(13, 32), nn.ReLU(), nn.Linear(32, 3)))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.evaluate = Evaluator(cfg, val, world)
        self.report = RunReport()

    def train_epoch(self, ep: int) -> None:
        self.sampler.set_epoch(ep)
        for xb, yb in self.loader:
            self.opt.zero_grad()
            nn.functional.cross_entropy(self.model(xb), yb).backward()
            self.opt.step()

    def run(self) -> None:
        for ep in range(self.cfg.epochs):
            self.train_epoch(ep)
            row = {"epoch": ep, "rank": dist.get_rank()}
            if self.evaluate.active:
                row["acc"] = self.evaluate(self.model.module)
                log.info("epoch %d eval acc %.3f", ep, row["acc"])
            self.report.add(**row)
        log.info("report: %s", self.report.gather())


def main():
    cfg = JobCfg()
    output_dir(NAME)
    info = init_distributed()
    seed_everything(2)
    Job(cfg, info.world_size).run()
    dist.barrier()
    shutdown_distributed()


if __name__ == "__main__":
    main()
