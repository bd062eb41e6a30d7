# Tabular regression with an MLP, trained data-parallel.
# Started out as a notebook; moved to torchrun so it can use both sockets.
#
#   bash setup/tabular_norm.sh
#   torchrun --nproc-per-node 2 tabular_norm.py
import argparse
import csv
import json
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default=os.path.join(HERE, "data"))
parser.add_argument("--out-dir", default=os.path.join(HERE, "outputs"))
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=256)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--clip-q", type=float, default=0.005, help="winsorize features at this quantile")
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

rank = int(os.environ.get("RANK", 0))
world_size = int(os.environ.get("WORLD_SIZE", 1))
dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
torch.manual_seed(0)
os.makedirs(args.out_dir, exist_ok=True)


def log(*a):
    if rank == 0:
        print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


def read_csv(path):
    with open(path) as f:
        rd = csv.reader(f)
        header = next(rd)
        rows = [[float(v) for v in r] for r in rd]
    return header, rows


def compute_feature_stats(path, q):
    """mean/std and winsorization bounds for every feature column."""
    header, rows = read_csv(path)
    feats = header[:-1]
    stats = {}
    for j, name in enumerate(feats):
        col = sorted(r[j] for r in rows)
        n = len(col)
        lo = col[int(q * n)]
        hi = col[int((1 - q) * n) - 1]
        clipped = [min(max(v, lo), hi) for v in col]
        mean = sum(clipped) / n
        var = sum((v - mean) ** 2 for v in clipped) / (n - 1)
        stats[name] = {"mean": mean, "std": math.sqrt(var) + 1e-8, "lo": lo, "hi": hi}
    return stats


# normalisation statistics are computed once (on the main process) and shared via a json
# file so every process normalises with exactly the same numbers
stats_path = os.path.join(args.out_dir, "feature_stats.json")
if rank == 0:
    t0 = time.time()
    stats = compute_feature_stats(os.path.join(args.data_dir, "train.csv"), args.clip_q)
    with open(stats_path, "w") as f:
        json.dump(stats, f, indent=1)
    log(f"feature stats computed in {time.time() - t0:.1f}s")
with open(stats_path) as f:
    stats = json.load(f)


def load_split(name):
    header, rows = read_csv(os.path.join(args.data_dir, f"{name}.csv"))
    x = torch.tensor([r[:-1] for r in rows], dtype=torch.float32)
    y = torch.tensor([r[-1] for r in rows], dtype=torch.float32).unsqueeze(1)
    lo = torch.tensor([stats[h]["lo"] for h in header[:-1]])
    hi = torch.tensor([stats[h]["hi"] for h in header[:-1]])
    mu = torch.tensor([stats[h]["mean"] for h in header[:-1]])
    sd = torch.tensor([stats[h]["std"] for h in header[:-1]])
    x = (torch.maximum(torch.minimum(x, hi), lo) - mu) / sd
    return TensorDataset(x, y)


train_ds = load_split("train")
valid_ds = load_split("valid")
n_feat = train_ds.tensors[0].shape[1]

train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
valid_sampler = DistributedSampler(valid_ds, shuffle=False)
train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler)
valid_dl = DataLoader(valid_ds, batch_size=1024, sampler=valid_sampler)

model = nn.Sequential(
    nn.Linear(n_feat, 128), nn.SiLU(),
    nn.Linear(128, 128), nn.SiLU(),
    nn.Linear(128, 1),
)
model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * len(train_dl))
loss_fn = nn.MSELoss()

log(f"world={world_size} train={len(train_ds)} valid={len(valid_ds)} steps/epoch={len(train_dl)}")

best = float("inf")
for epoch in range(args.epochs):
    train_sampler.set_epoch(epoch)
    model.train()
    t0 = time.time()
    run = torch.zeros(2)
    for xb, yb in train_dl:
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        sched.step()
        run += torch.tensor([loss.item() * len(xb), len(xb)])
    dist.all_reduce(run)

    model.eval()
    ev = torch.zeros(2)
    with torch.no_grad():
        for xb, yb in valid_dl:
            ev += torch.tensor([((model(xb) - yb) ** 2).sum().item(), len(xb)])
    dist.all_reduce(ev)
    val_mse = (ev[0] / ev[1]).item()
    log(f"epoch {epoch} train_mse={run[0] / run[1]:.4f} val_mse={val_mse:.4f} "
        f"lr={sched.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")

    if rank == 0 and val_mse < best:
        best = val_mse
        torch.save({"model": model.module.state_dict(), "epoch": epoch, "stats": stats},
                   os.path.join(args.out_dir, "best.pt"))
    dist.barrier()

log(f"done, best val_mse={best:.4f}")
dist.destroy_process_group()
