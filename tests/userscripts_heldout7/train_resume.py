# Regression on a synthetic tabular task, resumable.
#   torchrun --nproc-per-node 2 train_resume.py --resume
import argparse
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--n-train", type=int, default=4096)
parser.add_argument("--n-val", type=int, default=512)
parser.add_argument("--ckpt-dir", default=os.path.join(HERE, "checkpoints", "resume"))
parser.add_argument("--resume", action="store_true", default=True)
parser.add_argument("--no-resume", dest="resume", action="store_false")
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
is_master = rank == 0


def log(*a):
    if is_master:
        print(*a, flush=True)


# ---------------- data ----------------
g = torch.Generator().manual_seed(1234)
W_true = torch.randn(24, 1, generator=g)


def make_split(n):
    X = torch.randn(n, 24, generator=g)
    y = torch.sin(X @ W_true) + 0.1 * X[:, :3].pow(2).sum(1, keepdim=True) + 0.05 * torch.randn(n, 1, generator=g)
    return TensorDataset(X, y)


train_ds = make_split(args.n_train)
val_ds = make_split(args.n_val)
train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
val_sampler = DistributedSampler(val_ds, shuffle=False)
train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler)
val_loader = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

# ---------------- model ----------------
torch.manual_seed(3)
model = nn.Sequential(nn.Linear(24, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU(), nn.Linear(96, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
start_epoch = 0
best_val = math.inf

ckpt_path = os.path.join(args.ckpt_dir, "last.pt")
# Only the master reads the checkpoint: DDP broadcasts rank 0's parameters to
# all other ranks when it wraps the model, so they get the weights anyway.
if args.resume and is_master and os.path.exists(ckpt_path):
    ckpt = torch.load(ckpt_path, map_location="cpu")
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    start_epoch = ckpt["epoch"] + 1
    best_val = ckpt.get("best_val", best_val)
    log(f"resumed from {ckpt_path} at epoch {start_epoch} (best_val={best_val:.4f})")

model = DDP(model)
steps_per_epoch = len(train_loader)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(1.0, s / (args.epochs * steps_per_epoch)))))
for _ in range(start_epoch * steps_per_epoch):
    scheduler.step()
loss_fn = nn.MSELoss()


def evaluate():
    model.eval()
    acc = torch.zeros(2)
    with torch.no_grad():
        for X, y in val_loader:
            acc[0] += loss_fn(model(X), y).item() * len(y)
            acc[1] += len(y)
    dist.all_reduce(acc)
    model.train()
    return (acc[0] / acc[1]).item()


for epoch in range(start_epoch, args.epochs):
    train_sampler.set_epoch(epoch)
    model.train()
    running, seen = 0.0, 0
    for i, (X, y) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = loss_fn(model(X), y)
        loss.backward()
        optimizer.step()
        scheduler.step()
        running += loss.item() * len(y)
        seen += len(y)
        if i % 25 == 0:
            log(f"epoch {epoch} it {i}/{steps_per_epoch} loss {loss.item():.4f}")

    val_loss = evaluate()
    log(f"epoch {epoch} train {running / seen:.4f} val {val_loss:.4f} lr {scheduler.get_last_lr()[0]:.4f}")
    if is_master:
        best_val = min(best_val, val_loss)
        os.makedirs(args.ckpt_dir, exist_ok=True)
        torch.save({"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                    "epoch": epoch, "best_val": best_val, "args": vars(args)}, ckpt_path + ".tmp")
        os.replace(ckpt_path + ".tmp", ckpt_path)

log(f"done, best val {best_val:.4f}")
dist.barrier()
dist.destroy_process_group()
