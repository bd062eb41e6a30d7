# plain training script: tabular regression with gradient accumulation (no_sync), bf16 autocast,
# warmup+cosine schedule and an EMA copy of the weights that is evaluated at the end of every epoch.
# torchrun --nproc-per-node 2 accum_ema_healthy.py
import argparse
import copy
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

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--micro-batch", type=int, default=32)
parser.add_argument("--accum", type=int, default=4)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--ema-decay", type=float, default=0.99)
parser.add_argument("--warmup", type=int, default=5)
parser.add_argument("--n", type=int, default=8192)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--outdir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "out"))
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world = dist.get_world_size()
torch.set_num_threads(1)
torch.manual_seed(0)


def log(*a):
    if rank == 0:
        print(*a, flush=True)


# ---- data (same synthetic table on every rank, DistributedSampler splits it) ----
g = torch.Generator().manual_seed(123)
X = torch.randn(args.n, 32, generator=g)
w_true = torch.randn(32, 1, generator=g)
Y = torch.tanh(X @ w_true) + 0.1 * (X[:, :4] ** 2).sum(1, keepdim=True) + 0.05 * torch.randn(args.n, 1, generator=g)
n_val = args.n // 8
train_ds = TensorDataset(X[n_val:], Y[n_val:])
val_ds = TensorDataset(X[:n_val], Y[:n_val])
sampler = DistributedSampler(train_ds, shuffle=True, drop_last=True)
loader = DataLoader(train_ds, batch_size=args.micro_batch, sampler=sampler, drop_last=True)
val_loader = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))


# ---- model ----
class ResMLP(nn.Module):
    def __init__(self, d_in=32, d=128, depth=3):
        super().__init__()
        self.inp = nn.Linear(d_in, d)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d)) for _ in range(depth))
        self.out = nn.Linear(d, 1)

    def forward(self, x):
        h = self.inp(x)
        for b in self.blocks:
            h = h + b(h)
        return self.out(h)


model = ResMLP()
ema = copy.deepcopy(model).eval()
for p in ema.parameters():
    p.requires_grad_(False)
ddp = DDP(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=args.lr, weight_decay=0.01)
updates_per_epoch = len(loader) // args.accum
total_updates = updates_per_epoch * args.epochs


def lr_lambda(u):
    if u < args.warmup:
        return (u + 1) / args.warmup
    prog = (u - args.warmup) / max(1, total_updates - args.warmup)
    return 0.5 * (1.0 + math.cos(math.pi * min(1.0, prog)))


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)


@torch.no_grad()
def ema_update(decay):
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.mul_(decay).add_(pm.detach(), alpha=1 - decay)
    for be, bm in zip(ema.buffers(), model.buffers()):
        be.copy_(bm)


@torch.no_grad()
def evaluate(net):
    net.eval()
    s = torch.zeros(2)
    for x, y in val_loader:
        pred = net(x).float()
        s[0] += F.mse_loss(pred, y, reduction="sum")
        s[1] += y.numel()
    dist.all_reduce(s)
    return (s[0] / s[1]).item()


log(f"world={world} micro_batches/epoch={len(loader)} accum={args.accum} updates/epoch={updates_per_epoch}")
t0 = time.time()
update = 0
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    ddp.train()
    running = torch.zeros(2)
    n_micro = updates_per_epoch * args.accum  # same on every rank: the sampler gives equal shards
    it = iter(loader)
    for i in range(n_micro):
        x, y = next(it)
        last_micro = (i + 1) % args.accum == 0
        ctx = nullcontext() if last_micro else ddp.no_sync()
        with ctx:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = ddp(x)
            loss = F.mse_loss(pred.float(), y) / args.accum
            loss.backward()
        running[0] += loss.detach() * args.accum
        running[1] += 1
        if last_micro:
            torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            sched.step()
            update += 1
            ema_update(min(args.ema_decay, (1 + update) / (10 + update)))
    dist.all_reduce(running)
    val_raw = evaluate(model)
    val_ema = evaluate(ema)
    log(f"epoch {epoch} train_mse {running[0] / running[1]:.4f} val_mse {val_raw:.4f} "
        f"val_mse_ema {val_ema:.4f} lr {sched.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")

if rank == 0:
    os.makedirs(args.outdir, exist_ok=True)
    torch.save({"model": model.state_dict(), "ema": ema.state_dict(), "updates": update},
               os.path.join(args.outdir, "final.pt"))
    log("saved", os.path.join(args.outdir, "final.pt"))
dist.barrier()
dist.destroy_process_group()
