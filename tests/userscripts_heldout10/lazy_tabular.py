# churn model on the tabular export -- multi-process version
# run: torchrun --nproc-per-node 2 lazy_tabular.py
import argparse
import csv
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
parser.add_argument("--data", default="data/churn.csv")
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--bs", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--hidden", type=int, nargs="+", default=[128, 64])
parser.add_argument("--dropout", type=float, default=0.1)
parser.add_argument("--out", default="runs/churn")
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(0)


def log(*a):
    if rank == 0:
        print(time.strftime("%H:%M:%S"), *a, flush=True)


# ---------------------------------------------------------------- data
PLANS = ["basic", "plus", "pro"]
NUMERIC = ["tenure", "monthly", "support_calls", "usage_gb", "age", "discount"]

rows = []
with open(args.data) as f:
    for r in csv.DictReader(f):
        feats = [float(r[c]) for c in NUMERIC]
        feats += [1.0 if r["plan"] == p else 0.0 for p in PLANS]
        rows.append((feats, int(r["churn"])))

X = torch.tensor([r[0] for r in rows])
y = torch.tensor([r[1] for r in rows])
n_val = len(X) // 10
X_train, y_train = X[n_val:], y[n_val:]
X_val, y_val = X[:n_val], y[:n_val]

# standardise numeric columns with training statistics
mu = X_train[:, :len(NUMERIC)].mean(0)
sd = X_train[:, :len(NUMERIC)].std(0) + 1e-6
X_train[:, :len(NUMERIC)] = (X_train[:, :len(NUMERIC)] - mu) / sd
X_val[:, :len(NUMERIC)] = (X_val[:, :len(NUMERIC)] - mu) / sd

train_ds = TensorDataset(X_train, y_train)
val_ds = TensorDataset(X_val, y_val)
train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
val_sampler = DistributedSampler(val_ds, shuffle=False)
train_dl = DataLoader(train_ds, batch_size=args.bs, sampler=train_sampler, drop_last=True)
val_dl = DataLoader(val_ds, batch_size=256, sampler=val_sampler)
log(f"{len(train_ds)} train rows, {len(val_ds)} val rows, {X.shape[1]} features")


# ---------------------------------------------------------------- model
# Lazy layers so the feature engineering above can change without touching
# the model definition.
def build_mlp(hidden, dropout, n_out=2):
    layers = []
    for h in hidden:
        layers += [nn.LazyLinear(h), nn.ReLU(), nn.Dropout(dropout)]
    layers.append(nn.LazyLinear(n_out))
    return nn.Sequential(*layers)


model = build_mlp(args.hidden, args.dropout)

if rank == 0:
    # dry run to materialise the lazy layers, then print a summary for the log
    with torch.no_grad():
        model(X_train[:2])
    n_params = sum(p.numel() for p in model.parameters())
    for name, p in model.named_parameters():
        print(f"  {name:12s} {tuple(p.shape)}")
    log(f"model has {n_params:,} parameters")

model = DDP(model)
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
# churners are the minority class
pos_frac = y_train.float().mean().item()
class_w = torch.tensor([1.0, (1 - pos_frac) / max(pos_frac, 1e-3)])


def evaluate():
    model.eval()
    tot = torch.zeros(4)  # loss_sum, correct, n, true positives
    with torch.no_grad():
        for xb, yb in val_dl:
            out = model(xb)
            tot[0] += F.cross_entropy(out, yb, weight=class_w, reduction="sum")
            pred = out.argmax(1)
            tot[1] += (pred == yb).sum()
            tot[2] += len(yb)
            tot[3] += ((pred == 1) & (yb == 1)).sum()
    dist.all_reduce(tot)
    model.train()
    return tot[0] / tot[2], tot[1] / tot[2], tot[3]


# ---------------------------------------------------------------- train
best = float("inf")
os.makedirs(args.out, exist_ok=True)
for epoch in range(args.epochs):
    train_sampler.set_epoch(epoch)
    t0 = time.time()
    seen, loss_sum = 0, 0.0
    for step, (xb, yb) in enumerate(train_dl):
        out = model(xb)
        loss = F.cross_entropy(out, yb, weight=class_w)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.item() * len(yb)
        seen += len(yb)
    sched.step()
    vloss, vacc, tp = evaluate()
    log(f"epoch {epoch} train_loss {loss_sum / seen:.4f} val_loss {vloss:.4f} "
        f"val_acc {vacc:.3f} tp {int(tp)} ({time.time() - t0:.1f}s)")
    if vloss < best:
        best = vloss.item()
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "mu": mu, "sd": sd, "epoch": epoch},
                       os.path.join(args.out, "best.pt"))

log(f"done, best val loss {best:.4f}")
dist.destroy_process_group()
