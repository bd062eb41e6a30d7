"""Tabular regression baseline (house-price style features), data-parallel on CPU.

Originally written for `mp.spawn(main, nprocs=N)`; now launched with
    torchrun --nproc-per-node 2 train_regressor.py
"""
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
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--weight-decay", type=float, default=1e-4)
parser.add_argument("--n-samples", type=int, default=4096)
parser.add_argument("--n-features", type=int, default=24)
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--seed", type=int, default=17)
parser.add_argument("--backend", default="gloo")
parser.add_argument("--pg-timeout", type=int, default=10)
# kept from the mp.spawn version so the script can still be started by hand
parser.add_argument("--rank", type=int, default=0)
parser.add_argument("--world-size", type=int, default=int(os.environ.get("WORLD_SIZE", 1)))
parser.add_argument("--out", default="runs/regressor")
args = parser.parse_args()

# ---------------------------------------------------------------- distributed
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29500")
dist.init_process_group(
    backend=args.backend,
    init_method="env://",
    rank=args.rank,
    world_size=args.world_size,
    timeout=timedelta(seconds=args.pg_timeout),
)
rank = dist.get_rank()
world_size = dist.get_world_size()
is_main = rank == 0
torch.manual_seed(args.seed)


def log(msg):
    if is_main:
        print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


log(f"process group up: world_size={world_size} backend={args.backend}")

# ---------------------------------------------------------------- data
g = torch.Generator().manual_seed(args.seed)
X = torch.randn(args.n_samples, args.n_features, generator=g)
true_w = torch.randn(args.n_features, 1, generator=g)
y = X @ true_w + 0.3 * torch.sin(3 * X[:, :1]) + 0.05 * torch.randn(args.n_samples, 1, generator=g)

n_val = args.n_samples // 8
train_ds = TensorDataset(X[n_val:], y[n_val:])
val_ds = TensorDataset(X[:n_val], y[:n_val])

train_sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank, shuffle=True, seed=args.seed)
val_sampler = DistributedSampler(val_ds, num_replicas=world_size, rank=rank, shuffle=False)
train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
val_loader = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

# ---------------------------------------------------------------- model


class ResidualMLP(nn.Module):
    def __init__(self, d_in, hidden, n_blocks=3):
        super().__init__()
        self.inp = nn.Linear(d_in, hidden)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, hidden))
            for _ in range(n_blocks)
        )
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        h = self.inp(x)
        for blk in self.blocks:
            h = h + blk(h)
        return self.head(h)


model = DDP(ResidualMLP(args.n_features, args.hidden))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
total_steps = args.epochs * len(train_loader)
warmup = max(1, total_steps // 20)


def lr_at(step):
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total_steps - warmup)
    return 0.5 * (1 + math.cos(math.pi * progress))


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)


@torch.no_grad()
def evaluate():
    model.eval()
    sums = torch.zeros(2)
    for xb, yb in val_loader:
        pred = model(xb)
        sums[0] += F.mse_loss(pred, yb, reduction="sum")
        sums[1] += yb.numel()
    dist.all_reduce(sums)
    model.train()
    return (sums[0] / sums[1]).item()


# ---------------------------------------------------------------- train
step = 0
t0 = time.time()
for epoch in range(args.epochs):
    train_sampler.set_epoch(epoch)
    running = 0.0
    for xb, yb in train_loader:
        pred = model(xb)
        loss = F.mse_loss(pred, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        running += loss.item()
        step += 1
        if step % 20 == 0:
            log(f"epoch {epoch} step {step} loss {loss.item():.4f} lr {sched.get_last_lr()[0]:.2e}")
    val_mse = evaluate()
    log(f"epoch {epoch} done: train {running / len(train_loader):.4f} val_mse {val_mse:.4f} "
        f"({time.time() - t0:.1f}s)")

if is_main:
    os.makedirs(args.out, exist_ok=True)
    torch.save(model.module.state_dict(), os.path.join(args.out, "final.pt"))
    log(f"saved {args.out}/final.pt")

dist.barrier()
dist.destroy_process_group()
