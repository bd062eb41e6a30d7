# Sensor regression: train a small MLP on multi-channel sensor windows with DDP,
# then export the trained network with torch.export for the serving team.
#
#   torchrun --nproc-per-node 2 export_model.py
import argparse
import json
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--bs", type=int, default=64)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--window", type=int, default=24)
parser.add_argument("--channels", type=int, default=6)
parser.add_argument("--out-dir", default="artifacts")
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world = dist.get_world_size()
torch.manual_seed(0)


def log(*a):
    if rank == 0:
        print(time.strftime("%H:%M:%S"), *a, flush=True)


class SensorWindows(Dataset):
    """Synthetic sensor recordings; ~2% of readings are dropped (NaN) like the real loggers."""

    def __init__(self, n, window, channels, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.linspace(0, 4 * math.pi, window)
        freq = torch.rand(n, channels, 1, generator=g) * 2 + 0.5
        phase = torch.rand(n, channels, 1, generator=g) * math.pi
        x = torch.sin(freq * t + phase) + 0.1 * torch.randn(n, channels, window, generator=g)
        self.y = (freq.squeeze(-1).mean(1, keepdim=True) - 1.5) * 2
        drop = torch.rand(x.shape, generator=g) < 0.02
        x[drop] = float("nan")
        self.x = x.flatten(1)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class SensorNet(nn.Module):
    def __init__(self, in_dim, hidden=128):
        super().__init__()
        self.norm = nn.LayerNorm(in_dim)
        self.body = nn.Sequential(
            nn.Linear(in_dim, hidden), nn.SiLU(),
            nn.Linear(hidden, hidden), nn.SiLU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        # dropped readings come through as NaN; zero-fill them so one bad
        # sample does not poison the whole batch
        if torch.isnan(x).any():
            x = torch.nan_to_num(x, nan=0.0)
        return self.body(self.norm(x))


in_dim = args.window * args.channels
train_ds = SensorWindows(3000, args.window, args.channels, seed=1)
val_ds = SensorWindows(600, args.window, args.channels, seed=2)
train_sampler = DistributedSampler(train_ds, shuffle=True)
val_sampler = DistributedSampler(val_ds, shuffle=False)
train_dl = DataLoader(train_ds, batch_size=args.bs, sampler=train_sampler)
val_dl = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

model = DDP(SensorNet(in_dim))
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
loss_fn = nn.MSELoss()

if rank == 0:
    os.makedirs(args.out_dir, exist_ok=True)

history = []
for epoch in range(args.epochs):
    train_sampler.set_epoch(epoch)
    model.train()
    t0 = time.time()
    run = torch.zeros(2)
    for xb, yb in train_dl:
        pred = model(xb)
        loss = loss_fn(pred, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        run += torch.tensor([loss.item() * len(xb), len(xb)])
    sched.step()

    model.eval()
    val = torch.zeros(2)
    with torch.no_grad():
        for xb, yb in val_dl:
            val += torch.tensor([((model.module(xb) - yb) ** 2).sum().item(), len(xb)])
    dist.all_reduce(run)
    dist.all_reduce(val)
    tr_loss, va_loss = (run[0] / run[1]).item(), (val[0] / val[1]).item()
    history.append({"epoch": epoch, "train_mse": tr_loss, "val_mse": va_loss})
    log(f"epoch {epoch}: train {tr_loss:.4f} val {va_loss:.4f} ({time.time() - t0:.1f}s)")

# ---------------------------------------------------------------- export
if rank == 0:
    net = model.module.eval()
    torch.save(net.state_dict(), os.path.join(args.out_dir, "sensornet.pt"))
    example = (val_ds.x[:8].clone(),)
    exported = torch.export.export(net, example)
    torch.export.save(exported, os.path.join(args.out_dir, "sensornet.pt2"))
    with open(os.path.join(args.out_dir, "history.json"), "w") as f:
        json.dump(history, f, indent=2)
    log("exported", os.path.join(args.out_dir, "sensornet.pt2"))

dist.barrier()
dist.destroy_process_group()
