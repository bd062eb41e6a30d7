# review sentiment classifier - hashed char n-grams + small MLP, trained with DDP
# data: data/part-<rank>.tsv  (label \t text), one pre-split part per rank
# run:  torchrun --nproc-per-node 2 review_clf.py
import argparse
import os
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default="data")
parser.add_argument("--n-buckets", type=int, default=2048)
parser.add_argument("--ngram", type=int, default=3)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--bs", type=int, default=32)
parser.add_argument("--accum", type=int, default=2)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

torch.set_num_threads(1)
dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(0)


def log(*a):
    if rank == 0:
        print(time.strftime("%H:%M:%S"), *a, flush=True)


def featurize(text, n_buckets, n):
    """hashed bag of character n-grams, l2-normalised"""
    v = torch.zeros(n_buckets)
    t = " " + text.lower() + " "
    for i in range(len(t) - n + 1):
        v[zlib.crc32(t[i:i + n].encode("utf-8")) % n_buckets] += 1.0
    return v / v.norm().clamp_min(1e-6)


# ---- data: every rank reads its own part of the export ----
part_file = os.path.join(args.data_dir, f"part-{rank}.tsv")
texts, labels = [], []
with open(part_file, encoding="utf-8") as f:
    header = f.readline()
    for line in f:
        line = line.rstrip("\n")
        if not line:
            continue
        lab, txt = line.split("\t", 1)
        labels.append(int(lab))
        texts.append(txt)
print(f"[rank {rank}] {len(texts)} reviews from {part_file}", flush=True)

X = torch.stack([featurize(t, args.n_buckets, args.ngram) for t in texts])
Y = torch.tensor(labels)
n_val = len(X) // 10
train_ds = TensorDataset(X[n_val:], Y[n_val:])
val_ds = TensorDataset(X[:n_val], Y[:n_val])
# parts are the same size, but make sure every rank runs the same number of steps
n_batches = torch.tensor([len(train_ds) // args.bs])
dist.all_reduce(n_batches, op=dist.ReduceOp.MIN)
n_batches = int(n_batches)
train_dl = DataLoader(train_ds, batch_size=args.bs, shuffle=True, drop_last=True)
val_dl = DataLoader(val_ds, batch_size=256)

# ---- model ----
model = nn.Sequential(
    nn.Linear(args.n_buckets, 256),
    nn.ReLU(),
    nn.Dropout(0.1),
    nn.Linear(256, 2),
)
model = DDP(model)
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
steps_per_epoch = n_batches // args.accum
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr * 3,
                                            total_steps=args.epochs * steps_per_epoch)

# ---- train ----
for epoch in range(args.epochs):
    model.train()
    t0 = time.time()
    running = 0.0
    it = iter(train_dl)
    for step in range(steps_per_epoch):
        for micro in range(args.accum):
            xb, yb = next(it)
            if micro < args.accum - 1:
                with model.no_sync():
                    loss = F.cross_entropy(model(xb), yb) / args.accum
                    loss.backward()
            else:
                loss = F.cross_entropy(model(xb), yb) / args.accum
                loss.backward()
            running += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)

    # validation on every rank's own held-out slice, reduced as sums
    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for xb, yb in val_dl:
            correct[0] += (model(xb).argmax(1) == yb).sum()
            correct[1] += len(yb)
    dist.all_reduce(correct)
    tl = torch.tensor([running / max(steps_per_epoch, 1)])
    dist.all_reduce(tl)
    log(f"epoch {epoch} train_loss {tl.item() / world_size:.4f} "
        f"val_acc {(correct[0] / correct[1]).item():.3f} lr {sched.get_last_lr()[0]:.2e} "
        f"({time.time() - t0:.1f}s)")

if rank == 0:
    os.makedirs("checkpoints", exist_ok=True)
    torch.save(model.module.state_dict(), "checkpoints/review_clf.pt")
    log("saved checkpoints/review_clf.pt")
dist.barrier()
dist.destroy_process_group()
