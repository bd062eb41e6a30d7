"""Imbalanced binary classifier with a per-epoch metric report.

Validation data is exported grouped by label; each rank scores its
contiguous slice and metrics are averaged across ranks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import make_classification
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from ho18_runtime import get_logger, init_distributed, output_dir, seed_everything, shutdown_distributed

NAME = "auc_metric_sync"
log = get_logger(NAME)


@dataclass
class Options:
    n_samples: int = 2400
    val_fraction: float = 0.25
    epochs: int = 2
    batch: int = 64
    lr: float = 1e-2
    positive_share: float = 0.7
    metrics: Dict[str, Callable] = field(default_factory=dict)


# ---------------------------------------------------------------- metrics ----
def fast_auc(y_true: np.ndarray, score: np.ndarray):
    """Mann-Whitney AUC; chance level when only one class is present."""
    pos = y_true == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return 0.5
    ranks = score.argsort().argsort() + 1
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def accuracy(y_true: np.ndarray, score: np.ndarray):
    return float(((score > 0.5) == (y_true == 1)).mean())


class MetricBoard:
    def __init__(self, fns: Dict[str, Callable]):
        self.fns = fns

    def compute(self, y: np.ndarray, s: np.ndarray) -> Dict[str, object]:
        return {k: fn(y, s) for k, fn in self.fns.items()}

    @staticmethod
    def _mean_over_ranks(value) -> float:
        t = torch.as_tensor(value)
        dist.all_reduce(t)
        return t.item() / dist.get_world_size()

    def sync(self, local: Dict[str, object]) -> Dict[str, float]:
        return {k: self._mean_over_ranks(local[k]) for k in sorted(local)}


# ------------------------------------------------------------------- data ----
def make_splits(opt: Options):
    x, y = make_classification(n_samples=opt.n_samples, n_features=20, n_informative=8,
                               weights=[1 - opt.positive_share], random_state=0)
    x = x.astype(np.float32)
    n_val = int(len(x) * opt.val_fraction)
    xtr, ytr, xva, yva = x[n_val:], y[n_val:], x[:n_val], y[:n_val]
    order = np.argsort(yva, kind="stable")          # export is grouped by label
    return (xtr, ytr), (xva[order], yva[order])


def contiguous_slice(n: int, rank: int, world: int) -> slice:
    per = n // world
    return slice(rank * per, (rank + 1) * per)


# ---------------------------------------------------------------- trainer ----
class BinaryTrainer:
    def __init__(self, opt: Options, rank: int, world: int):
        self.opt = opt
        (xtr, ytr), (xva, yva) = make_splits(opt)
        ds = TensorDataset(torch.from_numpy(xtr), torch.from_numpy(ytr).float())
        self.sampler = DistributedSampler(ds, seed=1)
        self.loader = DataLoader(ds, batch_size=opt.batch, sampler=self.sampler)
        sl = contiguous_slice(len(xva), rank, world)
        self.xva, self.yva = torch.from_numpy(xva[sl]), yva[sl]
        self.model = DDP(nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 1)))
        self.optim = torch.optim.Adam(self.model.parameters(), lr=opt.lr)
        self.board = MetricBoard(opt.metrics)

    def train_epoch(self, epoch: int):
        self.sampler.set_epoch(epoch)
        self.model.train()
        for xb, yb in self.loader:
            self.optim.zero_grad()
            loss = nn.functional.binary_cross_entropy_with_logits(self.model(xb).squeeze(1), yb)
            loss.backward()
            self.optim.step()

    @torch.no_grad()
    def validate(self) -> Dict[str, float]:
        self.model.eval()
        score = torch.sigmoid(self.model(self.xva).squeeze(1)).numpy().astype(np.float64)
        return self.board.sync(self.board.compute(self.yva, score))


def main():
    output_dir(NAME)
    info = init_distributed()
    seed_everything(21)
    opt = Options(metrics={"auc": fast_auc, "acc": accuracy})
    trainer = BinaryTrainer(opt, info.rank, info.world_size)
    for ep in range(opt.epochs):
        trainer.train_epoch(ep)
        log.info("epoch %d metrics %s", ep, trainer.validate())
    shutdown_distributed()


if __name__ == "__main__":
    main()
