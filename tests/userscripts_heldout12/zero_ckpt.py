"""Tabular regression trainer with ZeRO-1 optimizer state sharding.

Launch:  torchrun --nproc-per-node 2 zero_ckpt.py
"""
import argparse
import logging
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

log = logging.getLogger("zero_ckpt")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--n-samples", type=int, default=4096)
    p.add_argument("--n-features", type=int, default=32)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--save-every", type=int, default=1)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def make_data(n, d, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = torch.tanh(x @ w) + 0.1 * torch.randn(n, 1, generator=g)
    split = int(0.9 * n)
    return TensorDataset(x[:split], y[:split]), TensorDataset(x[split:], y[split:])


class MLP(nn.Module):
    def __init__(self, d, hidden=128):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0

        train_ds, val_ds = make_data(args.n_samples, args.n_features)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=42)
        self.train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.train_sampler)
        self.val_loader = DataLoader(val_ds, batch_size=256,
                                     sampler=DistributedSampler(val_ds, shuffle=False))

        torch.manual_seed(0)
        self.model = DDP(MLP(args.n_features))
        # ZeRO stage 1: every rank only keeps the Adam moments for its shard of the parameters
        self.optimizer = ZeroRedundancyOptimizer(
            self.model.parameters(),
            optimizer_class=torch.optim.AdamW,
            lr=args.lr,
            weight_decay=args.weight_decay,
        )
        self.loss_fn = nn.MSELoss()
        self.global_step = 0
        self.best_val = float("inf")

    def train_epoch(self, epoch):
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        running, n = 0.0, 0
        for x, y in self.train_loader:
            self.optimizer.zero_grad(set_to_none=True)
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
            self.optimizer.step()
            running += loss.item() * x.size(0)
            n += x.size(0)
            self.global_step += 1
        return running / max(n, 1)

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        stats = torch.zeros(2)
        for x, y in self.val_loader:
            stats[0] += self.loss_fn(self.model(x), y).item() * x.size(0)
            stats[1] += x.size(0)
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def save_checkpoint(self, epoch, val_loss):
        if not self.is_main:
            return
        os.makedirs(self.args.ckpt_dir, exist_ok=True)
        state = {
            "epoch": epoch,
            "global_step": self.global_step,
            "model": self.model.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "val_loss": val_loss,
        }
        path = os.path.join(self.args.ckpt_dir, f"epoch{epoch:03d}.pt")
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)
        log.info("saved %s", path)

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            train_loss = self.train_epoch(epoch)
            val_loss = self.validate()
            if self.is_main:
                log.info("epoch %d  train %.4f  val %.4f  (%.1fs)", epoch, train_loss, val_loss, time.time() - t0)
            if val_loss < self.best_val:
                self.best_val = val_loss
            if (epoch + 1) % self.args.save_every == 0:
                self.save_checkpoint(epoch, val_loss)
        if self.is_main:
            log.info("done, best val %.4f", self.best_val)


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    logging.basicConfig(level=logging.INFO,
                        format=f"[rank{dist.get_rank()}] %(asctime)s %(message)s")
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
