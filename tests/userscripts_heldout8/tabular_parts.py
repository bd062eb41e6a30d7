# Churn-segment classifier on the exported CSV parts.
# Parts are too big to load all at once in prod, so every rank streams its own
# parts (round-robin) one at a time and trains on each in turn.
#
#   bash setup/tabular_parts.sh && torchrun --nproc-per-node 2 tabular_parts.py
import argparse
import glob
import os
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from numpy.lib import recfunctions as rfn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tabular"))
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--log-every", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(1234)
torch.set_num_threads(1)


def log(*a):
    print(f"[rank {rank}] {time.strftime('%H:%M:%S')}", *a, flush=True)


parts = sorted(glob.glob(os.path.join(args.data_dir, "part-*.csv")))
if not parts:
    raise SystemExit(f"no parts found in {args.data_dir}, run setup/tabular_parts.sh first")
my_parts = parts[rank::world_size]
log(f"{len(parts)} parts total, this rank reads {[os.path.basename(p) for p in my_parts]}")

FEATURES = None
NUM_CLASSES = 4


def load_part(path):
    """Read one exported part; column names come from the header."""
    global FEATURES
    arr = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    if FEATURES is None:
        FEATURES = [n for n in arr.dtype.names if n != "label"]
    x = rfn.structured_to_unstructured(arr[FEATURES]).astype(np.float32)
    y = arr["label"]
    return torch.from_numpy(x), torch.from_numpy(np.ascontiguousarray(y))


# feature normalisation stats from the first part of every rank, averaged
x0, _ = load_part(my_parts[0])
stats = torch.stack([x0.mean(0), x0.std(0)])
dist.all_reduce(stats)
stats /= world_size
mean, std = stats[0], stats[1].clamp_min(1e-6)

model = nn.Sequential(
    nn.Linear(len(FEATURES), args.hidden),
    nn.LayerNorm(args.hidden),
    nn.GELU(),
    nn.Dropout(0.1),
    nn.Linear(args.hidden, args.hidden),
    nn.GELU(),
    nn.Linear(args.hidden, NUM_CLASSES),
)
model = DDP(model)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
steps_per_part = 1200 // args.batch_size + 1
total_steps = args.epochs * len(my_parts) * steps_per_part
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr * 3, total_steps=total_steps)

global_step = 0
for epoch in range(args.epochs):
    model.train()
    ep_loss = torch.zeros(2)
    t0 = time.time()
    for part_path in my_parts:
        x, y = load_part(part_path)
        x = (x - mean) / std
        loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, drop_last=False)
        for xb, yb in loader:
            logits = model(xb)
            loss = F.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            global_step += 1
            ep_loss[0] += loss.detach() * xb.size(0)
            ep_loss[1] += xb.size(0)
            if global_step % args.log_every == 0 and rank == 0:
                log(f"step {global_step} loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.2e}")
        log(f"finished {os.path.basename(part_path)}")

    dist.all_reduce(ep_loss)
    # quick accuracy on the last part this rank saw
    model.eval()
    with torch.no_grad():
        pred = model.module(x).argmax(1)
        acc = torch.tensor([(pred == y).sum().item(), y.numel()], dtype=torch.float64)
    dist.all_reduce(acc)
    if rank == 0:
        log(f"epoch {epoch} train_loss {(ep_loss[0] / ep_loss[1]).item():.4f} "
            f"acc {(acc[0] / acc[1]).item():.3f} ({time.time() - t0:.1f}s)")

if rank == 0:
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "churn_mlp.pt")
    torch.save({"model": model.module.state_dict(), "mean": mean, "std": std, "features": FEATURES}, out)
    log("saved", out)
dist.destroy_process_group()
