# Tabular classifier with mixup, trained on the pre-sharded feature parts
# (data/parts/part-XXXXX.csv, one part per rank, written by the preprocessing job).
#
#   torchrun --nproc-per-node 2 mixup_cls.py
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
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--parts", default=os.path.join(HERE, "data", "parts"))
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--mixup-alpha", type=float, default=0.4)
parser.add_argument("--mixup-prob", type=float, default=1.0)
parser.add_argument("--label-smoothing", type=float, default=0.05)
parser.add_argument("--num-classes", type=int, default=5)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
is_main = rank == 0

# ---------------------------------------------------------------- seeding
# same init on every rank, but different augmentation streams per rank
torch.manual_seed(args.seed)
aug_gen = torch.Generator().manual_seed(args.seed * 1000 + rank)
np_rng = np.random.default_rng(args.seed * 1000 + rank)


def log(*a):
    if is_main:
        print(*a, flush=True)


# ---------------------------------------------------------------- data
parts = sorted(glob.glob(os.path.join(args.parts, "part-*.csv")))
assert len(parts) >= world_size, f"need at least {world_size} parts, found {len(parts)}"
my_parts = parts[rank::world_size]
arrays = [np.loadtxt(p, delimiter=",", skiprows=1, dtype=np.float32) for p in my_parts]
table = np.concatenate(arrays)
features = torch.from_numpy(table[:, :-1])
labels = torch.from_numpy(table[:, -1]).long()
print(f"[rank {rank}] {len(my_parts)} part(s), {len(labels)} rows", flush=True)

mean = features.mean(0, keepdim=True)
std = features.std(0, keepdim=True) + 1e-6
features = (features - mean) / std

train_ds = TensorDataset(features, labels)
loader_gen = torch.Generator().manual_seed(args.seed + rank)
train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, generator=loader_gen, drop_last=False)

# ---------------------------------------------------------------- model
model = nn.Sequential(
    nn.Linear(16, 128), nn.GELU(), nn.Dropout(0.1),
    nn.Linear(128, 128), nn.GELU(), nn.Dropout(0.1),
    nn.Linear(128, args.num_classes),
)
model = DDP(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
steps_per_epoch = len(train_loader)
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs * steps_per_epoch)


def mixup(x, y_onehot):
    """Standard mixup: blend each sample with a random partner from the batch."""
    if np_rng.random() > args.mixup_prob:
        return x, y_onehot
    lam = float(np_rng.beta(args.mixup_alpha, args.mixup_alpha))
    lam = max(lam, 1.0 - lam)
    index = torch.randperm(args.batch_size, generator=aug_gen)
    x = lam * x + (1.0 - lam) * x[index]
    y_onehot = lam * y_onehot + (1.0 - lam) * y_onehot[index]
    return x, y_onehot


def soft_ce(logits, target):
    return torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()


# ---------------------------------------------------------------- train
log(f"world_size={world_size} steps/epoch={steps_per_epoch}")
global_step = 0
for epoch in range(args.epochs):
    model.train()
    t0 = time.time()
    running = torch.zeros(3)  # loss sum, correct, count
    for x, y in train_loader:
        y_soft = F.one_hot(y, args.num_classes).float()
        y_soft = y_soft * (1 - args.label_smoothing) + args.label_smoothing / args.num_classes
        x_mix, y_mix = mixup(x, y_soft)

        logits = model(x_mix)
        loss = soft_ce(logits, y_mix)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        global_step += 1

        with torch.no_grad():
            running += torch.tensor([loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)])

    dist.all_reduce(running)
    log(f"epoch {epoch} loss {running[0] / running[2]:.4f} "
        f"train-acc(mixed) {running[1] / running[2]:.3f} lr {scheduler.get_last_lr()[0]:.2e} "
        f"({time.time() - t0:.1f}s)")

if is_main:
    torch.save(model.module.state_dict(), os.path.join(HERE, "mixup_cls.pt"))
    log("saved mixup_cls.pt")
dist.barrier()
dist.destroy_process_group()
