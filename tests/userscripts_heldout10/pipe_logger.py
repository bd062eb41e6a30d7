# Train a small MLP regressor on synthetic tabular data with DDP.
# Rank 0 streams per-step metrics to a sidecar process (metrics_sink.py)
# so the training loop never blocks on disk I/O.
import argparse
import json
import math
import os
import subprocess
import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=6)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--n-samples", type=int, default=8192)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--out-dir", default="runs/pipe_logger")
parser.add_argument("--log-grad-norms", action="store_true", default=True)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(1234)
torch.set_num_threads(1)

os.makedirs(args.out_dir, exist_ok=True)

# ---------------- data ----------------
g = torch.Generator().manual_seed(0)
X = torch.randn(args.n_samples, 20, generator=g)
true_w = torch.randn(20, 1, generator=g)
y = X @ true_w + 0.1 * torch.randn(args.n_samples, 1, generator=g)
n_val = args.n_samples // 8
train_ds = TensorDataset(X[n_val:], y[n_val:])
val_ds = TensorDataset(X[:n_val], y[:n_val])

sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
val_loader = DataLoader(val_ds, batch_size=256)

# ---------------- model ----------------
model = nn.Sequential(
    nn.Linear(20, args.hidden), nn.GELU(),
    nn.Linear(args.hidden, args.hidden), nn.GELU(),
    nn.Linear(args.hidden, args.hidden), nn.GELU(),
    nn.Linear(args.hidden, 1),
)
model = DDP(model)
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-4)
steps_per_epoch = len(train_loader)
total_steps = args.epochs * steps_per_epoch
sched = torch.optim.lr_scheduler.LambdaLR(
    opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * s / total_steps)))
loss_fn = nn.MSELoss()

# ---------------- metrics sidecar (rank 0) ----------------
sink = None
if rank == 0:
    sink_script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics_sink.py")
    sink = subprocess.Popen(
        [sys.executable, sink_script, os.path.join(args.out_dir, "metrics.jsonl")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    print(f"[rank0] metrics sink pid={sink.pid}", flush=True)


def log_metrics(record):
    if sink is None:
        return
    sink.stdin.write(json.dumps(record) + "\n")
    sink.stdin.flush()


def grad_norms(module):
    return {name: round(p.grad.norm().item(), 6)
            for name, p in module.named_parameters() if p.grad is not None}


@torch.no_grad()
def evaluate():
    model.eval()
    tot, n = 0.0, 0
    for xb, yb in val_loader:
        tot += loss_fn(model.module(xb), yb).item() * len(xb)
        n += len(xb)
    model.train()
    return tot / max(n, 1)


# ---------------- train ----------------
global_step = 0
t0 = time.time()
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    running = 0.0
    for i, (xb, yb) in enumerate(train_loader):
        pred = model(xb)
        loss = loss_fn(pred, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        global_step += 1
        running += loss.item()

        rec = {"step": global_step, "epoch": epoch, "loss": loss.item(),
               "lr": sched.get_last_lr()[0], "time": round(time.time() - t0, 3)}
        if args.log_grad_norms:
            rec["grad_norm"] = grad_norms(model.module)
        log_metrics(rec)

        if rank == 0 and global_step % 50 == 0:
            print(f"epoch {epoch} step {global_step} loss {running / (i + 1):.4f}", flush=True)

    # average the epoch loss across ranks for the log line
    t = torch.tensor([running / steps_per_epoch])
    dist.all_reduce(t)
    if rank == 0:
        val = evaluate()
        print(f"== epoch {epoch}: train {t.item() / world_size:.4f} val {val:.4f}", flush=True)
        log_metrics({"epoch": epoch, "val_loss": val})
        torch.save(model.module.state_dict(), os.path.join(args.out_dir, "model.pt"))

if sink is not None:
    sink.stdin.close()
    sink.wait()
dist.barrier()
dist.destroy_process_group()
