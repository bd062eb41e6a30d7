#!/usr/bin/env python
"""DDP trainer for the synthetic sin-regression benchmark.

    torchrun --nproc-per-node 2 ckpt_symlink.py --epochs 6

Checkpoints go to <output-dir>/epochNNN.pt, best.pt points at the best one.
"""
import argparse
import math
import os
import time
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--grad-accum", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--warmup-steps", type=int, default=10)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--n-train", type=int, default=4096)
    p.add_argument("--n-val", type=int, default=512)
    p.add_argument("--d-in", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--output-dir", default="checkpoints")
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


def make_dataset(n, d_in, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, 1, generator=torch.Generator().manual_seed(0)) / math.sqrt(d_in)
    z = x @ w
    y = z + 0.3 * torch.sin(3 * z) + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class MLP(nn.Module):
    def __init__(self, d_in, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.GELU(),
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

        torch.manual_seed(args.seed)
        self.model = DDP(MLP(args.d_in, args.hidden))

        train_ds = make_dataset(args.n_train, args.d_in, seed=args.seed)
        val_ds = make_dataset(args.n_val, args.d_in, seed=args.seed + 1)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_loader = DataLoader(train_ds, batch_size=args.batch_size,
                                       sampler=self.train_sampler, drop_last=True)
        self.val_loader = DataLoader(val_ds, batch_size=128,
                                     sampler=DistributedSampler(val_ds, shuffle=False))

        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr,
                                           weight_decay=args.weight_decay)
        steps_per_epoch = len(self.train_loader) // args.grad_accum
        self.total_steps = steps_per_epoch * args.epochs
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self._lr_lambda)

        self.global_step = 0
        self.best_val = math.inf

    def _lr_lambda(self, step):
        if step < self.args.warmup_steps:
            return (step + 1) / self.args.warmup_steps
        progress = (step - self.args.warmup_steps) / max(1, self.total_steps - self.args.warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))

    def log(self, msg):
        if self.is_main:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def train_epoch(self, epoch):
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        accum = self.args.grad_accum
        running, n = 0.0, 0
        for i, (x, y) in enumerate(self.train_loader):
            do_step = (i + 1) % accum == 0
            ctx = nullcontext() if do_step else self.model.no_sync()
            with ctx:
                loss = F.mse_loss(self.model(x), y)
                (loss / accum).backward()
            running += loss.item()
            n += 1
            if do_step:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.global_step += 1
        return running / max(n, 1)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        stats = torch.zeros(2)
        for x, y in self.val_loader:
            stats[0] += F.mse_loss(self.model(x), y, reduction="sum")
            stats[1] += y.numel()
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def save_checkpoint(self, epoch, val_loss):
        if not self.is_main:
            return
        os.makedirs(self.args.output_dir, exist_ok=True)
        path = os.path.join(self.args.output_dir, f"epoch{epoch:03d}.pt")
        torch.save({
            "epoch": epoch,
            "global_step": self.global_step,
            "model": self.model.module.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "val_loss": val_loss,
            "args": vars(self.args),
        }, path)
        if val_loss < self.best_val:
            self.best_val = val_loss
            # keep best.pt as a cheap pointer instead of a second copy of the weights
            os.symlink(os.path.basename(path), os.path.join(self.args.output_dir, "best.pt"))
            self.log(f"new best val_loss={val_loss:.4f} -> {path}")

    def fit(self):
        self.log(f"world_size={self.world_size} steps/epoch={len(self.train_loader) // self.args.grad_accum}")
        for epoch in range(1, self.args.epochs + 1):
            t0 = time.time()
            train_loss = self.train_epoch(epoch)
            val_loss = self.evaluate()
            self.log(f"epoch {epoch} train_loss={train_loss:.4f} val_loss={val_loss:.4f} "
                     f"lr={self.scheduler.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")
            self.save_checkpoint(epoch, val_loss)
        self.log(f"done, best val_loss={self.best_val:.4f}")


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
