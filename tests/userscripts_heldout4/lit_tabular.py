"""Tabular regression: LightningModule-style model + a hand-written DDP loop.

Features: gradient accumulation with no_sync, EMA weights, cosine schedule,
validation of the EMA weights on the main process, early stopping decided on
rank 0 and broadcast to everybody.

    torchrun --nproc-per-node 2 lit_tabular.py
"""
import argparse
import contextlib
import copy
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))


class LitRegressor(nn.Module):
    """Keeps model, loss and optimiser config together, Lightning style."""

    def __init__(self, n_features, hidden=128, lr=2e-3, weight_decay=1e-4):
        super().__init__()
        self.hparams = dict(n_features=n_features, hidden=hidden, lr=lr, weight_decay=weight_decay)
        self.net = nn.Sequential(
            nn.Linear(n_features, hidden), nn.BatchNorm1d(hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), nn.SiLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch, model=None):
        x, y = batch
        pred = (model or self)(x)
        return F.smooth_l1_loss(pred, y)

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        pred = self(x)
        return {"mse": F.mse_loss(pred, y, reduction="sum"), "mae": (pred - y).abs().sum(), "n": len(y)}

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"],
                                weight_decay=self.hparams["weight_decay"])
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / total_steps)))
        return opt, sched


class EMA:
    def __init__(self, module, decay=0.99):
        self.decay = decay
        self.module = copy.deepcopy(module).eval()
        for p in self.module.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module):
        for e, p in zip(self.module.parameters(), module.parameters()):
            e.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)
        for e, b in zip(self.module.buffers(), module.buffers()):
            e.copy_(b)


def synthetic_housing(n, n_features, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, n_features, generator=g)
    w = torch.linspace(-1, 1, n_features)
    y = x @ w + 0.5 * torch.sin(2 * x[:, 0]) * x[:, 1] + 0.1 * torch.randn(n, generator=g)
    return TensorDataset(x, y)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--accumulate", type=int, default=2)
    p.add_argument("--features", type=int, default=24)
    p.add_argument("--n-train", type=int, default=4096)
    p.add_argument("--n-val", type=int, default=1024)
    p.add_argument("--patience", type=int, default=3)
    p.add_argument("--ckpt-dir", default=os.path.join(HERE, "checkpoints"))
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def main():
    args = parse_args()
    # defaults for a plain `python lit_tabular.py` debug run; torchrun sets the real ones
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_ds = synthetic_housing(args.n_train, args.features, seed=args.seed)
    val_ds = synthetic_housing(args.n_val, args.features, seed=args.seed + 100)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=256)

    lit = LitRegressor(args.features)
    ema = EMA(lit)  # before the DDP wrapper, like timm does
    model = DDP(lit)
    steps_per_epoch = len(train_dl) // args.accumulate
    opt, sched = lit.configure_optimizers(total_steps=steps_per_epoch * args.epochs)

    best, bad_epochs = float("inf"), 0
    t0 = time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        running = torch.zeros(2)
        for i, batch in enumerate(train_dl):
            sync_now = (i + 1) % args.accumulate == 0
            ctx = contextlib.nullcontext() if sync_now else model.no_sync()
            with ctx:
                loss = lit.training_step(batch, model=model) / args.accumulate
                loss.backward()
            running += torch.tensor([loss.item() * args.accumulate, 1.0])
            if sync_now:
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema.update(lit)
        # leftover micro-batches of an incomplete accumulation window are dropped
        opt.zero_grad(set_to_none=True)

        dist.all_reduce(running)
        train_loss = (running[0] / running[1]).item()

        stop = torch.zeros(1, dtype=torch.int64)
        if rank == 0:
            tot = {"mse": 0.0, "mae": 0.0, "n": 0}
            for batch in val_dl:
                out = ema.module.validation_step(batch)
                for k in tot:
                    tot[k] += float(out[k])
            val_mse, val_mae = tot["mse"] / tot["n"], tot["mae"] / tot["n"]
            print(f"epoch {epoch} train_loss {train_loss:.4f} ema_val_mse {val_mse:.4f} "
                  f"ema_val_mae {val_mae:.4f} lr {sched.get_last_lr()[0]:.2e} "
                  f"({time.time() - t0:.1f}s)", flush=True)
            if val_mse < best - 1e-4:
                best, bad_epochs = val_mse, 0
                os.makedirs(args.ckpt_dir, exist_ok=True)
                torch.save({"epoch": epoch, "model": lit.state_dict(), "ema": ema.module.state_dict(),
                            "val_mse": val_mse, "hparams": lit.hparams},
                           os.path.join(args.ckpt_dir, "best.pt"))
            else:
                bad_epochs += 1
            stop[0] = int(bad_epochs >= args.patience)
        dist.broadcast(stop, src=0)
        if stop.item():
            if rank == 0:
                print(f"early stopping at epoch {epoch}", flush=True)
            break

    if rank == 0:
        print(f"best ema_val_mse {best:.4f} after {time.time() - t0:.1f}s", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
