#!/usr/bin/env python
# Small transformer-ish regressor trained with a Trainer class.
# Memory-saving mode: activation checkpointing on every residual block.
import argparse
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--accum-steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--aux-weight", type=float, default=0.0, help="0 disables the auxiliary head")
    p.add_argument("--grad-ckpt", action="store_true", default=True)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


class SeqDataset(Dataset):
    """Noisy sums over sliding windows: target = mean of x over the sequence."""

    def __init__(self, n=2048, seq=32, feat=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, seq, feat, generator=g)
        self.y = self.x.mean(dim=(1, 2)) + 0.05 * torch.randn(n, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Regressor(nn.Module):
    def __init__(self, feat, dim, depth, grad_ckpt=False):
        super().__init__()
        self.inp = nn.Linear(feat, dim)
        self.blocks = nn.ModuleList(Block(dim) for _ in range(depth))
        self.head = nn.Linear(dim, 1)
        self.aux_head = nn.Linear(dim, 1)  # deep supervision on the first half, optional
        self.grad_ckpt = grad_ckpt

    def forward(self, x, with_aux=False):
        h = self.inp(x)
        aux = None
        for i, blk in enumerate(self.blocks):
            if self.grad_ckpt and self.training:
                h = checkpoint(blk, h, use_reentrant=True)
            else:
                h = blk(h)
            if with_aux and i == len(self.blocks) // 2 - 1:
                aux = self.aux_head(h.mean(1)).squeeze(-1)
        return self.head(h.mean(1)).squeeze(-1), aux


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        torch.manual_seed(1234)
        self.train_ds = SeqDataset(seed=0)
        self.val_ds = SeqDataset(n=256, seed=1)
        self.sampler = DistributedSampler(self.train_ds, shuffle=True, drop_last=True)
        self.loader = DataLoader(self.train_ds, batch_size=args.batch_size, sampler=self.sampler)
        self.val_loader = DataLoader(self.val_ds, batch_size=64,
                                     sampler=DistributedSampler(self.val_ds, shuffle=False))
        net = Regressor(8, args.dim, args.depth, grad_ckpt=args.grad_ckpt)
        # aux_head is only used when --aux-weight > 0, so let DDP tolerate unused params
        self.model = DDP(net, find_unused_parameters=True)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.05)
        steps = args.epochs * math.ceil(len(self.loader) / args.accum_steps)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, total_steps=steps)
        self.global_step = 0

    def log(self, msg):
        if self.rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def compute_loss(self, x, y):
        use_aux = self.args.aux_weight > 0
        pred, aux = self.model(x, with_aux=use_aux)
        loss = F.mse_loss(pred, y)
        if use_aux:
            loss = loss + self.args.aux_weight * F.mse_loss(aux, y)
        return loss

    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        total, n = 0.0, 0
        for i, (x, y) in enumerate(self.loader):
            last_micro = (i + 1) % self.args.accum_steps == 0 or (i + 1) == len(self.loader)
            if last_micro:
                loss = self.compute_loss(x, y) / self.args.accum_steps
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.opt.step()
                self.opt.zero_grad(set_to_none=True)
                self.sched.step()
                self.global_step += 1
            else:
                with self.model.no_sync():
                    loss = self.compute_loss(x, y) / self.args.accum_steps
                    loss.backward()
            total += loss.item() * self.args.accum_steps
            n += 1
            if self.global_step and self.global_step % 20 == 0 and last_micro:
                self.log(f"epoch {epoch} step {self.global_step} loss {total / n:.4f}")
        return total / max(n, 1)

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        se = torch.zeros(2)
        for x, y in self.val_loader:
            pred, _ = self.model(x)
            se += torch.tensor([F.mse_loss(pred, y, reduction="sum").item(), len(y)])
        dist.all_reduce(se)
        return (se[0] / se[1]).item()

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            tr = self.train_epoch(epoch)
            va = self.validate()
            self.log(f"epoch {epoch}: train {tr:.4f} val {va:.4f} ({time.time() - t0:.1f}s)")
        if self.rank == 0:
            os.makedirs("checkpoints", exist_ok=True)
            torch.save(self.model.module.state_dict(), "checkpoints/regressor.pt")


def main():
    args = get_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
