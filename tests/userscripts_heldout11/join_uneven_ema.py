"""Regression on per-site sensor logs; sites are unevenly sized after QC filtering.

Lightning-style module driven by a hand-written loop.  Ranks run out of data at
different times, which DDP's Join context manager takes care of.

torchrun --nproc-per-node 2 join_uneven_ema.py
"""
import argparse
import copy
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))


def make_site_data(site, n_raw=480, n_feat=12):
    """Synthetic readings for one site; QC drops readings with sensor dropouts."""
    g = torch.Generator().manual_seed(100 + site)
    x = torch.randn(n_raw, n_feat, generator=g)
    w = torch.linspace(-1, 1, n_feat)
    y = (x @ w).unsqueeze(1) + 0.1 * torch.randn(n_raw, 1, generator=g)
    # site 1 has a flaky sensor: more dropouts (exact zeros) in feature 3
    drop_rate = 0.05 + 0.25 * site
    dropout = torch.rand(n_raw, generator=g) < drop_rate
    x[dropout, 3] = 0.0
    keep = x[:, 3] != 0.0
    return x[keep], y[keep]


class LitRegressor(nn.Module):
    def __init__(self, n_feat=12, hidden=64, lr=2e-3, weight_decay=1e-4):
        super().__init__()
        self.hparams = dict(n_feat=n_feat, hidden=hidden, lr=lr, weight_decay=weight_decay)
        self.net = nn.Sequential(nn.Linear(n_feat, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, model=None):
        x, y = batch
        pred = (model or self)(x)
        return F.mse_loss(pred, y)

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        return F.mse_loss(self(x), y, reduction="sum"), len(y)

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"],
                                weight_decay=self.hparams["weight_decay"])
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / total_steps)))
        return opt, sched


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--accumulate", type=int, default=2)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    x, y = make_site_data(site=rank)
    n_val = len(x) // 8
    train = TensorDataset(x[n_val:], y[n_val:])
    val = TensorDataset(x[:n_val], y[:n_val])
    train_loader = DataLoader(train, batch_size=args.batch_size, shuffle=True, drop_last=True)
    val_loader = DataLoader(val, batch_size=64)
    print(f"[rank{rank}] {len(train)} train / {len(val)} val samples, {len(train_loader)} batches", flush=True)

    lit = LitRegressor()
    ddp = DDP(lit)
    opt, sched = lit.configure_optimizers(total_steps=args.epochs * len(train_loader) // args.accumulate)
    ema = EMA(lit)

    for epoch in range(args.epochs):
        ddp.train()
        running, seen = 0.0, 0
        # uneven batch counts across ranks: Join shadows the collectives of finished ranks
        with Join([ddp]):
            for i, batch in enumerate(train_loader):
                loss = lit.training_step(batch, model=ddp) / args.accumulate
                loss.backward()
                if (i + 1) % args.accumulate == 0:
                    opt.step()
                    sched.step()
                    opt.zero_grad(set_to_none=True)
                    ema.update(lit)
                running += loss.item() * args.accumulate
                seen += 1
        opt.zero_grad(set_to_none=True)

        # validation with the EMA weights, reduced as sums
        tot = torch.zeros(3)
        for batch in val_loader:
            se, n = lit.validation_step(batch)
            tot[0] += se
            tot[1] += n
        tot[2] = running / max(seen, 1)
        dist.all_reduce(tot)
        ema_se = sum(F.mse_loss(ema.shadow(b[0]), b[1], reduction="sum").item() for b in val_loader)
        ema_tot = torch.tensor([ema_se])
        dist.all_reduce(ema_tot)
        if rank == 0:
            print(f"epoch {epoch}: train {tot[2] / world:.4f} val_mse {tot[0] / tot[1]:.4f} "
                  f"ema_val_mse {ema_tot.item() / tot[1]:.4f} lr {sched.get_last_lr()[0]:.2e}", flush=True)

    if rank == 0:
        os.makedirs(os.path.join(HERE, "ckpt"), exist_ok=True)
        torch.save({"model": lit.state_dict(), "ema": ema.shadow.state_dict(), "hparams": lit.hparams},
                   os.path.join(HERE, "ckpt", "regressor.pt"))
        print("saved", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
