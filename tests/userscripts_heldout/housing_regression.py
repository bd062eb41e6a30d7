# House price regression, data parallel over however many ranks torchrun gives us.
#   torchrun --nproc-per-node 2 housing_regression.py --csv data/housing.csv
import argparse
import csv
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--csv", default="data/housing.csv")
parser.add_argument("--epochs", type=int, default=30)
parser.add_argument("--batch-size", type=int, default=50)
parser.add_argument("--lr", type=float, default=1e-2)
parser.add_argument("--pg-timeout", type=float, default=10.0)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(0)

# ---- data ------------------------------------------------------------------
with open(args.csv) as f:
    reader = csv.reader(f)
    header = next(reader)
    rows = [[float(v) for v in row] for row in reader]
table = torch.tensor(rows)
features, target = table[:, :-1], table[:, -1:]

# standardise with statistics of the full file so every rank uses the same scaling
feat_mean, feat_std = features.mean(0), features.std(0)
tgt_mean, tgt_std = target.mean(), target.std()
features = (features - feat_mean) / feat_std
target = (target - tgt_mean) / tgt_std

# interleaved split keeps the ranks' price distributions similar
my_idx = torch.arange(rank, len(rows), world_size)
X, y = features[my_idx], target[my_idx]
if rank == 0:
    print(f"{len(rows)} rows, {len(header) - 1} features, {len(my_idx)} rows per rank", flush=True)

# ---- model -----------------------------------------------------------------
model = nn.Sequential(nn.Linear(X.shape[1], 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
model = DDP(model)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10, gamma=0.5)
loss_fn = nn.MSELoss()

# ---- train -----------------------------------------------------------------
t0 = time.time()
for epoch in range(args.epochs):
    perm = torch.randperm(len(X))
    running = torch.zeros(2, dtype=torch.float64)
    for start in range(0, len(X), args.batch_size):
        idx = perm[start:start + args.batch_size]
        pred = model(X[idx])
        loss = loss_fn(pred, y[idx])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running += torch.tensor([loss.item() * len(idx), len(idx)], dtype=torch.float64)
    scheduler.step()

    dist.all_reduce(running)
    if rank == 0 and (epoch % 5 == 0 or epoch == args.epochs - 1):
        rmse = (running[0] / running[1]).sqrt().item() * tgt_std.item()
        print(f"epoch {epoch:3d}  train rmse ${rmse:,.0f}", flush=True)

if rank == 0:
    print(f"finished in {time.time() - t0:.1f}s", flush=True)
dist.destroy_process_group()
