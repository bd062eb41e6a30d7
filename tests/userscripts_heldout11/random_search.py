# Random-search trial for a small residual MLP on the two-spirals problem.
# One trial = one sampled config, trained with DDP.  Lightning-style module, hand-written loop.
#
#   torchrun --nproc-per-node 2 random_search.py --trial 0
import argparse
import json
import math
import os
import random
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trials")


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def sample_config(base):
    cfg = dict(base)
    cfg["lr"] = 10 ** random.uniform(-4, -2)
    cfg["width"] = random.choice([64, 96, 128, 192, 256])
    cfg["depth"] = random.choice([2, 3])
    cfg["dropout"] = random.uniform(0.0, 0.3)
    cfg["weight_decay"] = 10 ** random.uniform(-6, -3)
    return cfg


def two_spirals(n, noise=0.15, seed=0):
    rng = np.random.default_rng(seed)
    t = np.sqrt(rng.random(n)) * 3 * math.pi
    lab = rng.integers(0, 2, n)
    sign = np.where(lab == 0, 1.0, -1.0)
    x = np.stack([sign * t * np.cos(t), sign * t * np.sin(t)], 1) / 10 + rng.normal(0, noise, (n, 2))
    return TensorDataset(torch.tensor(x, dtype=torch.float32), torch.tensor(lab))


class ResBlock(nn.Module):
    def __init__(self, width, dropout):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, width * 2)
        self.fc2 = nn.Linear(width * 2, width)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.norm(x)))))


class SpiralModule(nn.Module):
    """Lightning-like: the module owns its steps and its optimizer config."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.inp = nn.Linear(2, cfg["width"])
        self.blocks = nn.Sequential(*[ResBlock(cfg["width"], cfg["dropout"]) for _ in range(cfg["depth"])])
        self.out = nn.Linear(cfg["width"], 2)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))

    def training_step(self, net, batch):
        x, y = batch
        return F.cross_entropy(net(x), y)

    @torch.no_grad()
    def validation_step(self, net, batch):
        x, y = batch
        logits = net(x)
        return torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                             (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)

    def configure_optimizers(self, params, steps):
        opt = torch.optim.AdamW(params, lr=self.cfg["lr"], weight_decay=self.cfg["weight_decay"])
        warm = max(1, steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
        return opt, sched


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trial", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    # different seed per process so dropout masks / shuffling differ between data-parallel workers
    seed_everything(args.seed + args.trial * 1000 + rank)

    cfg = sample_config({"trial": args.trial, "epochs": args.epochs, "batch_size": args.batch_size})
    if rank == 0:
        print("trial config:", json.dumps(cfg), flush=True)

    train_ds, val_ds = two_spirals(8000, seed=1), two_spirals(2000, seed=2)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler)
    val_dl = DataLoader(val_ds, batch_size=500, sampler=DistributedSampler(val_ds, shuffle=False))

    module = SpiralModule(cfg)
    net = DDP(module)
    opt, sched = module.configure_optimizers(net.parameters(), args.epochs * len(train_dl))

    history = []
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        net.train()
        for batch in train_dl:
            loss = module.training_step(net, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        net.eval()
        agg = sum((module.validation_step(net, b) for b in val_dl), torch.zeros(3, dtype=torch.float64))
        dist.all_reduce(agg)
        val_loss, val_acc = (agg[0] / agg[2]).item(), (agg[1] / agg[2]).item()
        history.append({"epoch": epoch, "val_loss": val_loss, "val_acc": val_acc})
        if rank == 0:
            print(f"epoch {epoch} train_loss {loss.item():.4f} val_loss {val_loss:.4f} val_acc {val_acc:.3f}",
                  flush=True)

    if rank == 0:
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, f"trial{args.trial:03d}.json"), "w") as f:
            json.dump({"config": cfg, "history": history}, f, indent=2)
        torch.save(module.state_dict(), os.path.join(OUT, f"trial{args.trial:03d}.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
