# Defect classifier for the two assembly lines (tabular sensor features -> ok/defect).
#
#   bash setup/sensor_defects.sh
#   torchrun --nproc-per-node 2 sensor_defects.py
#
# Each rank scores its own slice of the validation week and dumps the predictions
# to preds/rank<r>.csv so QA can look at them line by line.
import argparse
import csv
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
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default=os.path.join(HERE, "data"))
parser.add_argument("--out-dir", default=os.path.join(HERE, "out"))
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--hidden", type=int, default=64)
parser.add_argument("--target-acc", type=float, default=0.90,
                    help="stop as soon as validation accuracy reaches this")
parser.add_argument("--patience", type=int, default=5)
parser.add_argument("--min-delta", type=float, default=1e-3)
parser.add_argument("--seed", type=int, default=7)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(args.seed)
torch.set_num_threads(1)


def log(msg):
    print(f"[rank {rank}] {msg}", flush=True)


# ---------------------------------------------------------------- data
train = np.load(os.path.join(args.data_dir, "train.npz"))
train_ds = TensorDataset(torch.from_numpy(train["x"]), torch.from_numpy(train["y"]))
sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank,
                             shuffle=True, seed=args.seed)
train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)

# validation week = all lines, in file order
val_files = sorted(glob.glob(os.path.join(args.data_dir, "val_*.npz")))
val_x = np.concatenate([np.load(f)["x"] for f in val_files])
val_y = np.concatenate([np.load(f)["y"] for f in val_files])
# contiguous slice per rank so the prediction dumps keep the original row order
my_rows = np.array_split(np.arange(len(val_x)), world_size)[rank]
val_ds = TensorDataset(torch.from_numpy(val_x[my_rows]), torch.from_numpy(val_y[my_rows]))
val_loader = DataLoader(val_ds, batch_size=256)
log(f"train rows/rank={len(sampler)} val rows={len(val_ds)} from {[os.path.basename(f) for f in val_files]}")

# ---------------------------------------------------------------- model
n_feat = val_x.shape[1]
model = nn.Sequential(
    nn.Linear(n_feat, args.hidden), nn.ReLU(),
    nn.Linear(args.hidden, args.hidden), nn.ReLU(),
    nn.Dropout(0.1),
    nn.Linear(args.hidden, 2),
)
model = DDP(model)
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=8, gamma=0.5)


def validate():
    model.eval()
    rows, loss_sum, correct = [], 0.0, 0
    with torch.no_grad():
        for x, y in val_loader:
            logits = model.module(x)
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            pred = logits.argmax(1)
            correct += (pred == y).sum().item()
            prob = logits.softmax(1)[:, 1]
            rows.extend(zip(y.tolist(), pred.tolist(), [round(p, 4) for p in prob.tolist()]))
    model.train()
    return loss_sum / len(val_ds), correct / len(val_ds), rows


def dump_preds(rows, epoch):
    os.makedirs(os.path.join(args.out_dir, "preds"), exist_ok=True)
    with open(os.path.join(args.out_dir, "preds", f"rank{rank}.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["row", "label", "pred", "p_defect", "epoch"])
        for r, (lab, pr, p) in zip(my_rows.tolist(), rows):
            w.writerow([r, lab, pr, p, epoch])


# ---------------------------------------------------------------- train
best_loss = float("inf")
bad_epochs = 0
t_start = time.time()
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    model.train()
    running, seen = 0.0, 0
    for step, (x, y) in enumerate(train_loader):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.item() * len(y)
        seen += len(y)
    scheduler.step()

    val_loss, val_acc, rows = validate()
    dump_preds(rows, epoch)
    log(f"epoch {epoch:2d} train_loss {running / seen:.4f} val_loss {val_loss:.4f} "
        f"val_acc {val_acc:.3f} ({time.time() - t_start:.1f}s)")

    # early stopping
    if val_acc >= args.target_acc:
        log(f"val_acc {val_acc:.3f} >= target {args.target_acc}, stopping early")
        break
    if val_loss < best_loss - args.min_delta:
        best_loss = val_loss
        bad_epochs = 0
    else:
        bad_epochs += 1
        if bad_epochs >= args.patience:
            log(f"no improvement for {args.patience} epochs, stopping")
            break

# ---------------------------------------------------------------- finish
if rank == 0:
    os.makedirs(args.out_dir, exist_ok=True)
    torch.save(model.module.state_dict(), os.path.join(args.out_dir, "model.pt"))
    log(f"saved model after epoch {epoch}")
dist.barrier()
log("done")
dist.destroy_process_group()
