"""Shared-trunk multi-task model (classification + regression heads).

Task streams are routed to ranks by a routing table; each batch runs the
heads of the tasks present in it and sums their losses.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import ConcatDataset, DataLoader, Dataset

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "multitask_heads"
log = get_logger(NAME)

TASK_IDS = {"cls": 0, "reg": 1}
# the regression stream is small, so only one reader is assigned to it
STREAM_ROUTING: Dict[str, List[int]] = {"cls": [0, 1], "reg": [1]}


@dataclass
class MTConfig:
    d_in: int = 20
    d_hidden: int = 64
    n_classes: int = 5
    batch: int = 32
    steps: int = 30
    lr: float = 1e-3
    bucket_cap_mb: float = 25.0


class TaskStream(Dataset):
    def __init__(self, task: str, n: int, d_in: int, seed: int):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, d_in, generator=g)
        self.task = TASK_IDS[task]
        if task == "cls":
            self.y = (self.x[:, :5].argmax(1)).float()
        else:
            self.y = self.x[:, 5:10].sum(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.task, self.y[i]


def streams_for(rank: int, cfg: MTConfig) -> Dataset:
    parts = []
    for task, readers in STREAM_ROUTING.items():
        if rank in readers:
            parts.append(TaskStream(task, 400, cfg.d_in, seed=10 * rank + TASK_IDS[task]))
    return ConcatDataset(parts)


class MultiTaskNet(nn.Module):
    def __init__(self, cfg: MTConfig):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(cfg.d_in, cfg.d_hidden), nn.ReLU(),
                                   nn.Linear(cfg.d_hidden, cfg.d_hidden), nn.ReLU())
        self.heads = nn.ModuleDict({
            "cls": nn.Linear(cfg.d_hidden, cfg.n_classes),
            "reg": nn.Sequential(nn.Linear(cfg.d_hidden, 16), nn.Tanh(), nn.Linear(16, 1)),
        })

    def forward(self, x, task):
        h = self.trunk(x)
        out = {}
        for name, tid in TASK_IDS.items():
            sel = task == tid
            if sel.any():
                out[name] = (self.heads[name](h[sel]), sel)
        return out


def multitask_loss(out, y) -> torch.Tensor:
    total = torch.zeros(())
    if "cls" in out:
        logits, sel = out["cls"]
        total = total + F.cross_entropy(logits, y[sel].long())
    if "reg" in out:
        pred, sel = out["reg"]
        total = total + F.mse_loss(pred.squeeze(1), y[sel])
    return total


class MultiTaskRunner:
    def __init__(self, cfg: MTConfig, rank: int):
        self.cfg = cfg
        ds = streams_for(rank, cfg)
        self.loader = DataLoader(ds, batch_size=cfg.batch, shuffle=True, drop_last=True,
                                 generator=torch.Generator().manual_seed(rank))
        self.model = DDP(MultiTaskNet(cfg), bucket_cap_mb=cfg.bucket_cap_mb, find_unused_parameters=False)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=cfg.lr)

    def batches(self):
        while True:
            yield from self.loader

    def run(self):
        for step, (x, task, y) in zip(range(self.cfg.steps), self.batches()):
            self.opt.zero_grad()
            loss = multitask_loss(self.model(x, task), y)
            loss.backward()
            self.opt.step()
            if (step + 1) % 10 == 0:
                t = loss.detach().clone()
                dist.all_reduce(t)
                log.info("step %d mean loss %.4f", step, t.item() / dist.get_world_size())


def main():
    cfg = MTConfig()
    output_dir(NAME)
    info = init_distributed()
    seed_everything(6)
    MultiTaskRunner(cfg, info.rank).run()
    shutdown_distributed()


if __name__ == "__main__":
    main()
