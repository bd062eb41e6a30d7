#!/usr/bin/env python
"""Handwritten-digit CNN (sklearn's 8x8 digits) with DDP.

Config lives in a YAML file next to the run outputs.  Evaluation is exact:
every validation sample is scored exactly once across the ranks (no padding
duplicates like DistributedSampler adds), the predictions are gathered and
accuracy / macro-F1 are computed on the full set.
"""
import logging
import os
import shutil
import sys
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import yaml
from sklearn.datasets import load_digits
from sklearn.metrics import f1_score
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint_sequential
from torch.utils.data import DataLoader, Sampler, TensorDataset

RUN_DIR = "/tmp/ho17_digits_cnn"

DEFAULT_YAML = """\
data:
  val_fraction: 0.2765
  split_seed: 3
train:
  epochs: 6
  batch_size: 32
  accum_steps: 2
  lr: 0.003
  seed: 0
model:
  channels: [16, 32]
  dropout: 0.1
eval:
  batch_size: 64
"""

logger = logging.getLogger("digits")


class ShardSampler(Sampler):
    """Contiguous shard per rank; the last rank also takes the remainder.

    Nothing is dropped and nothing is duplicated, so metrics computed on the
    gathered predictions are exact.
    """

    def __init__(self, n, rank, world):
        per = n // world
        self.lo = rank * per
        self.hi = n if rank == world - 1 else self.lo + per

    def __iter__(self):
        return iter(range(self.lo, self.hi))

    def __len__(self):
        return self.hi - self.lo


class ShuffledShardSampler(ShardSampler):
    def __init__(self, n, rank, world, seed):
        super().__init__(n, rank, world)
        self.seed, self.epoch = seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter((self.lo + torch.randperm(len(self), generator=g)).tolist())


class DigitsCNN(nn.Module):
    def __init__(self, channels, dropout):
        super().__init__()
        c1, c2 = channels
        self.trunk = nn.Sequential(
            nn.Conv2d(1, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(),
            nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c2, c2, 3, padding=1), nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(c2 * 16, 10))

    def forward(self, x):
        if self.training:
            x = checkpoint_sequential(self.trunk, 2, x, use_reentrant=False)
        else:
            x = self.trunk(x)
        return self.head(x)


class Evaluator:
    """Runs the model over this rank's shard and gathers results everywhere."""

    def __init__(self, loader):
        self.loader = loader

    @torch.no_grad()
    def _predict(self, model):
        preds, targets = [], []
        for x, y in self.loader:
            preds.append(model(x).argmax(1))
            targets.append(y)
        return torch.cat(preds), torch.cat(targets)

    @staticmethod
    def _all_gather_cat(t):
        bufs = [torch.empty_like(t) for _ in range(dist.get_world_size())]
        dist.all_gather(bufs, t)
        return torch.cat(bufs)

    def _sync(self, preds, targets):
        return self._all_gather_cat(preds), self._all_gather_cat(targets)

    def compute(self, preds, targets):
        raise NotImplementedError

    def run(self, model):
        was_training = model.training
        model.eval()
        preds, targets = self._sync(*self._predict(model))
        model.train(was_training)
        return self.compute(preds.numpy(), targets.numpy())


class ClassificationEvaluator(Evaluator):
    def compute(self, preds, targets):
        return {
            "acc": float((preds == targets).mean()),
            "macro_f1": float(f1_score(targets, preds, average="macro")),
            "n": int(len(targets)),
        }


def setup_run_dir(is_lead):
    if is_lead:
        shutil.rmtree(RUN_DIR, ignore_errors=True)
        os.makedirs(RUN_DIR)
        with open(os.path.join(RUN_DIR, "config.yaml"), "w") as f:
            f.write(DEFAULT_YAML)
    dist.barrier()
    with open(os.path.join(RUN_DIR, "config.yaml")) as f:
        return yaml.safe_load(f)


def load_split(val_fraction, seed):
    d = load_digits()
    X = torch.tensor(d.data / 16.0, dtype=torch.float32).view(-1, 1, 8, 8)
    y = torch.tensor(d.target, dtype=torch.long)
    perm = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))
    n_val = int(round(len(X) * val_fraction))
    va, tr = perm[:n_val], perm[n_val:]
    return TensorDataset(X[tr], y[tr]), TensorDataset(X[va], y[va])


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format=f"%(asctime)s [rank {rank}/{world}] %(message)s")
    cfg = setup_run_dir(rank == 0)
    tcfg = cfg["train"]
    torch.manual_seed(tcfg["seed"])

    train_ds, val_ds = load_split(cfg["data"]["val_fraction"], cfg["data"]["split_seed"])
    train_sampler = ShuffledShardSampler(len(train_ds), rank, world, tcfg["seed"])
    train_dl = DataLoader(train_ds, batch_size=tcfg["batch_size"], sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=cfg["eval"]["batch_size"],
                        sampler=ShardSampler(len(val_ds), rank, world))
    logger.info("train %d / val %d samples; this rank scores %d val samples",
                len(train_ds), len(val_ds), len(val_dl.sampler))

    model = DDP(DigitsCNN(cfg["model"]["channels"], cfg["model"]["dropout"]))
    opt = torch.optim.Adam(model.parameters(), lr=tcfg["lr"])
    evaluator = ClassificationEvaluator(val_dl)
    best_f1 = -1.0

    for epoch in range(tcfg["epochs"]):
        train_sampler.set_epoch(epoch)
        t0, losses = time.time(), []
        opt.zero_grad(set_to_none=True)
        for i, (x, y) in enumerate(train_dl):
            sync_now = (i + 1) % tcfg["accum_steps"] == 0
            if sync_now:
                loss = F.cross_entropy(model(x), y) / tcfg["accum_steps"]
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:
                with model.no_sync():
                    loss = F.cross_entropy(model(x), y) / tcfg["accum_steps"]
                    loss.backward()
            losses.append(loss.item() * tcfg["accum_steps"])

        metrics = evaluator.run(model)
        logger.info("epoch %d loss %.4f val_acc %.4f val_f1 %.4f (n=%d, %.1fs)", epoch,
                    float(np.mean(losses)), metrics["acc"], metrics["macro_f1"], metrics["n"],
                    time.time() - t0)
        if metrics["macro_f1"] > best_f1 and rank == 0:
            best_f1 = metrics["macro_f1"]
            torch.save({"epoch": epoch, "model": model.module.state_dict(), "metrics": metrics},
                       os.path.join(RUN_DIR, "best.pt"))

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
