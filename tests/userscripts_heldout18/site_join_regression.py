"""Regression on per-site data of different sizes.

Each rank owns one "site" with its own number of samples, so ranks run a
different number of steps per epoch; DDP's Join context shadows the missing
all-reduces. Side channels: role subgroups, object collectives and an async
all-reduce that is overlapped with host work.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, List

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from ho18_runtime import PG_TIMEOUT, get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "site_join_regression"
log = get_logger(NAME)

# role table: which ranks take part in which side channel
ROLE_TABLE: Dict[str, List[int]] = {
    "trainers": [0, 1],
    "reporters": [1],
    "auditors": [0],
}


@dataclass
class Cfg:
    base_samples: int = 160
    extra_per_site: int = 57
    batch: int = 16
    epochs: int = 2
    lr: float = 0.05


def site_dataset(site: int, cfg: Cfg) -> TensorDataset:
    g = torch.Generator().manual_seed(100 + site)
    n = cfg.base_samples + cfg.extra_per_site * site
    x = torch.randn(n, 12, generator=g)
    w = torch.linspace(-1, 1, 12)
    y = x @ w + 0.1 * torch.randn(n, generator=g)
    return TensorDataset(x, y.unsqueeze(1))


class RoleGroups:
    """Creates one process group per role. new_group is collective over the
    world, so every rank walks the whole table in the same order."""

    def __init__(self, table: Dict[str, List[int]]):
        self.groups = {}
        self.members = {}
        for role in sorted(table):
            ranks = sorted(table[role])
            self.groups[role] = dist.new_group(ranks=ranks, timeout=PG_TIMEOUT)
            self.members[role] = ranks

    def has(self, role: str) -> bool:
        return dist.get_rank() in self.members[role]


class SiteTrainer:
    def __init__(self, cfg: Cfg, roles: RoleGroups):
        self.cfg, self.roles = cfg, roles
        rank = dist.get_rank()
        self.ds = site_dataset(rank, cfg)
        self.loader = DataLoader(self.ds, batch_size=cfg.batch, shuffle=True,
                                 generator=torch.Generator().manual_seed(rank))
        self.model = DDP(nn.Sequential(nn.Linear(12, 32), nn.Tanh(), nn.Linear(32, 1)))
        self.opt = torch.optim.SGD(self.model.parameters(), lr=cfg.lr)
        self.steps = 0

    def run_epoch(self) -> float:
        total = 0.0
        with Join([self.model]):
            for xb, yb in self.loader:
                self.opt.zero_grad()
                loss = nn.functional.mse_loss(self.model(xb), yb)
                loss.backward()
                self.opt.step()
                total += loss.item() * len(xb)
                self.steps += 1
        return total / len(self.ds)

    def weight_fingerprint(self) -> torch.Tensor:
        return torch.stack([p.detach().double().sum() for p in self.model.parameters()])


def overlapped_check(trainer: SiteTrainer) -> float:
    fp = trainer.weight_fingerprint()
    mine = fp.clone()
    handle = dist.all_reduce(fp, op=dist.ReduceOp.SUM, async_op=True)
    # host-side bookkeeping while the reduction is in flight
    summary = json.dumps({"steps": trainer.steps, "n": len(trainer.ds)})
    handle.wait()
    drift = (fp / dist.get_world_size() - mine).abs().max().item()
    log.info("fingerprint drift %.3g (%s)", drift, summary)
    return drift


def main() -> None:
    cfg = Cfg()
    out = output_dir(NAME)
    info = init_distributed()
    seed_everything(7)
    roles = RoleGroups(ROLE_TABLE)

    # the reporter decides the run tag and hands it to everyone
    reporter = ROLE_TABLE["reporters"][0]
    box = [f"run-{os.getpid()}" if info.rank == reporter else None]
    dist.broadcast_object_list(box, src=reporter)
    run_tag = box[0]

    trainer = SiteTrainer(cfg, roles)
    for epoch in range(cfg.epochs):
        loss = trainer.run_epoch()
        log.info("epoch %d site-loss %.4f steps so far %d", epoch, loss, trainer.steps)

    drift = overlapped_check(trainer)

    # per-site summaries gathered as python objects
    summaries = [None] * info.world_size
    dist.all_gather_object(summaries, {"rank": info.rank, "steps": trainer.steps, "drift": drift})

    # auditors cross-check among themselves on their own group
    if roles.has("auditors"):
        flag = torch.tensor([1.0 if drift < 1e-6 else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=roles.groups["auditors"])
        log.info("audit ok=%s", bool(flag.item()))

    if roles.has("reporters"):
        (out / f"{run_tag}.json").write_text(json.dumps(summaries, indent=1))
        log.info("report written: %s", summaries)

    dist.barrier(group=roles.groups["trainers"])
    shutdown_distributed()


if __name__ == "__main__":
    main()
