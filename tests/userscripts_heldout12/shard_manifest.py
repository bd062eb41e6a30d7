# Parcel-status classifier: plain top-level training script.
#   torchrun --nproc-per-node 2 shard_manifest.py
# rank 0 reads the class list and computes normalisation stats, everybody else
# receives them with broadcast_object_list (keeps the NFS home quiet).
import argparse
import json
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, random_split
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--config", default="config.json")
parser.add_argument("--data", default="data/train.pt")
parser.add_argument("--classes", default="data/classes.txt")
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--save", default="checkpoints/parcel.pt")
args = parser.parse_args()

with open(args.config) as f:
    cfg = json.load(f)

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(0)


def log(*a):
    if rank == 0:
        print(time.strftime("%H:%M:%S"), *a, flush=True)


blob = torch.load(args.data)
X, Y = blob["x"], blob["y"]

# ---- shared metadata: [mean, std, class_0, ..., class_{k-1}] ----
if rank == 0:
    with open(args.classes) as f:
        class_names = [ln.strip() for ln in f if ln.strip()]
    mean, std = X.mean(0), X.std(0).clamp_min(1e-6)
    meta = [mean, std] + class_names
    log(f"{len(class_names)} classes: {class_names}")
else:
    meta = [None] * (2 + cfg["num_classes"])
dist.broadcast_object_list(meta, src=0)
mean, std, class_names = meta[0], meta[1], meta[2:]
X = (X - mean) / std

dataset = TensorDataset(X, Y)
n_val = int(len(dataset) * cfg["val_fraction"])
train_set, val_set = random_split(dataset, [len(dataset) - n_val, n_val],
                                  generator=torch.Generator().manual_seed(0))
train_sampler = DistributedSampler(train_set, shuffle=True, seed=0)
val_sampler = DistributedSampler(val_set, shuffle=False)
train_loader = DataLoader(train_set, batch_size=cfg["batch_size"], sampler=train_sampler)
val_loader = DataLoader(val_set, batch_size=256, sampler=val_sampler)


class Net(nn.Module):
    def __init__(self, d_in, hidden, n_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, n_out)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        h = self.drop(F.silu(self.norm(self.fc1(x))))
        h = h + self.drop(F.silu(self.fc2(h)))
        return self.out(h)


model = DDP(Net(X.shape[1], cfg["hidden"], len(class_names)))
optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
steps_total = cfg["epochs"] * len(train_loader)
scheduler = torch.optim.lr_scheduler.LambdaLR(
    optimizer, lambda s: 0.5 * (1 + math.cos(math.pi * min(s, steps_total) / steps_total)))


@torch.no_grad()
def evaluate():
    model.eval()
    stats = torch.zeros(3)
    per_class = torch.zeros(len(class_names), 2)
    for xb, yb in val_loader:
        logits = model(xb)
        pred = logits.argmax(1)
        stats += torch.tensor([F.cross_entropy(logits, yb, reduction="sum").item(),
                               (pred == yb).sum().item(), len(yb)])
        for c in range(len(class_names)):
            m = yb == c
            per_class[c, 0] += (pred[m] == c).sum()
            per_class[c, 1] += m.sum()
    dist.all_reduce(stats)
    dist.all_reduce(per_class)
    model.train()
    return stats[0] / stats[2], stats[1] / stats[2], per_class[:, 0] / per_class[:, 1].clamp_min(1)


best_acc = 0.0
for epoch in range(cfg["epochs"]):
    train_sampler.set_epoch(epoch)
    t0 = time.time()
    seen, loss_sum = 0, 0.0
    for xb, yb in train_loader:
        loss = F.cross_entropy(model(xb), yb)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss_sum += loss.item() * len(yb)
        seen += len(yb)
    val_loss, val_acc, class_acc = evaluate()
    log(f"epoch {epoch} train_loss={loss_sum / seen:.4f} val_loss={val_loss:.4f} "
        f"val_acc={val_acc:.4f} ({time.time() - t0:.1f}s)")
    log("  per-class: " + ", ".join(f"{n}={a:.2f}" for n, a in zip(class_names, class_acc.tolist())))
    if rank == 0 and val_acc > best_acc:
        best_acc = val_acc.item()
        os.makedirs(os.path.dirname(args.save), exist_ok=True)
        torch.save({"model": model.module.state_dict(), "classes": class_names,
                    "mean": mean, "std": std, "epoch": epoch}, args.save)

log(f"done, best val_acc={best_acc:.4f}")
dist.destroy_process_group()
