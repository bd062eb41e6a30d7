# Train a small classifier on synthetic 10-class blobs with DDP.
# usage: torchrun --nproc-per-node 2 tracker_thread.py [--epochs N]
#
# Metrics go to runs/<run-name>/metrics.jsonl via the little RunTracker below
# (we can't reach the W&B server from the cluster, so this is a local stand-in).
import argparse
import json
import os
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class RunTracker:
    """Buffers scalars in memory; a background thread appends them to a jsonl file."""

    def __init__(self, run_dir, config, flush_every=100, flush_secs=30.0):
        os.makedirs(run_dir, exist_ok=True)
        self.path = os.path.join(run_dir, "metrics.jsonl")
        self.flush_every = flush_every
        self.flush_secs = flush_secs
        self._buf = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        with open(os.path.join(run_dir, "config.json"), "w") as f:
            json.dump(config, f, indent=2)
        self._thread = threading.Thread(target=self._flush_loop, name="tracker-flush", daemon=True)
        self._thread.start()

    def _flush_loop(self):
        while not self._stop.wait(self.flush_secs):
            self.flush()

    def log(self, step, **scalars):
        row = {"step": step, "ts": round(time.time(), 3)}
        row.update({k: float(v) for k, v in scalars.items()})
        with self._lock:
            self._buf.append(row)
            if len(self._buf) >= self.flush_every:
                self.flush()

    def flush(self):
        with self._lock:
            rows, self._buf = self._buf, []
        if not rows:
            return
        with open(self.path, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")

    def close(self):
        self._stop.set()
        self._thread.join()
        self.flush()


parser = argparse.ArgumentParser()
parser.add_argument("--run-name", default="blobs-mlp")
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--momentum", type=float, default=0.9)
parser.add_argument("--n-classes", type=int, default=10)
parser.add_argument("--n-samples", type=int, default=12000)
parser.add_argument("--dim", type=int, default=64)
parser.add_argument("--log-flush-every", type=int, default=100)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(args.seed)

# ---- data: gaussian blobs, same on every rank, sharded by DistributedSampler ----
g = torch.Generator().manual_seed(args.seed)
centers = 2.0 * torch.randn(args.n_classes, args.dim, generator=g)
labels = torch.randint(0, args.n_classes, (args.n_samples,), generator=g)
feats = centers[labels] + 1.5 * torch.randn(args.n_samples, args.dim, generator=g)
n_val = args.n_samples // 10
train_ds = TensorDataset(feats[n_val:], labels[n_val:])
val_ds = TensorDataset(feats[:n_val], labels[:n_val])
train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
val_loader = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))

# ---- model ----
model = nn.Sequential(
    nn.Linear(args.dim, 256), nn.ReLU(), nn.Dropout(0.1),
    nn.Linear(256, 128), nn.ReLU(),
    nn.Linear(128, args.n_classes),
)
model = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, nesterov=True)
steps_total = args.epochs * len(train_loader)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps_total, pct_start=0.2)

tracker = None
if rank == 0:
    tracker = RunTracker(os.path.join("runs", args.run_name), vars(args), flush_every=args.log_flush_every)
    print(f"world_size={world_size} train={len(train_ds)} val={len(val_ds)} steps/epoch={len(train_loader)}",
          flush=True)

step = 0
t_start = time.time()
for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    for x, y in train_loader:
        logits = model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=0.05)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        step += 1

        # global mean loss / acc for the dashboard
        stats = torch.stack([loss.detach(), (logits.argmax(1) == y).float().mean()])
        dist.all_reduce(stats)
        stats /= world_size
        if tracker is not None:
            tracker.log(step, loss=stats[0], acc=stats[1], lr=sched.get_last_lr()[0])
        if rank == 0 and step % 50 == 0:
            print(f"ep {epoch} step {step} loss {stats[0]:.4f} acc {stats[1]:.3f} "
                  f"({time.time() - t_start:.1f}s)", flush=True)

    # ---- validation ----
    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for x, y in val_loader:
            correct[0] += (model(x).argmax(1) == y).sum()
            correct[1] += y.numel()
    dist.all_reduce(correct)
    val_acc = (correct[0] / correct[1]).item()
    if tracker is not None:
        tracker.log(step, val_acc=val_acc, epoch=epoch)
        print(f"== epoch {epoch} val_acc {val_acc:.4f}", flush=True)

if tracker is not None:
    tracker.close()
    torch.save(model.module.state_dict(), os.path.join("runs", args.run_name, "final.pt"))
dist.destroy_process_group()
