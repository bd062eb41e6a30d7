# Two-stage pipeline-parallel MLP classifier for the sensor data set.
# rank 0 holds the encoder (stage 0), rank 1 the classifier (stage 1).
# Activations go forward with send/recv, their gradients come back the same way.
#
#   bash setup/pp_two_stage.sh
#   torchrun --nproc-per-node 2 pp_two_stage.py --epochs 5
import argparse
import os
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--data", default=os.path.join(HERE, "data", "sensors.npz"))
parser.add_argument("--epochs", type=int, default=5)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--hidden", type=int, default=128)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--ckpt-dir", default=os.path.join(HERE, "ckpt"))
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world = dist.get_world_size()
assert world == 2, "this script is a 2-stage pipeline, run it with 2 processes"
torch.manual_seed(args.seed)


def log(*a):
    print(f"[stage {rank}]", *a, flush=True)


# ---------------------------------------------------------------- data
blob = np.load(args.data)
X = torch.from_numpy(blob["X"])
Y = torch.from_numpy(blob["y"])
n_val = 200
train_ds = TensorDataset(X[n_val:], Y[n_val:])
val_ds = TensorDataset(X[:n_val], Y[:n_val])
n_classes = int(Y.max()) + 1


def make_loader(ds, shuffle, epoch):
    # both stages build the same loader with the same seed so that stage 1's labels
    # line up with the activations stage 0 sends
    g = torch.Generator()
    g.manual_seed(args.seed + epoch)
    return DataLoader(ds, batch_size=args.batch_size, shuffle=shuffle, generator=g)


# ---------------------------------------------------------------- model
if rank == 0:
    stage = nn.Sequential(
        nn.Linear(X.shape[1], args.hidden), nn.ReLU(),
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
    )
else:
    stage = nn.Sequential(
        nn.Linear(args.hidden, args.hidden), nn.ReLU(),
        nn.Dropout(0.1),
        nn.Linear(args.hidden, n_classes),
    )
opt = torch.optim.Adam(stage.parameters(), lr=args.lr)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
log("params:", sum(p.numel() for p in stage.parameters()))

# stage 1 receives into a preallocated buffer (avoids an allocation per step)
act_buf = torch.empty(args.batch_size, args.hidden)


def stage0_step(xb, train=True):
    act = stage(xb)
    dist.send(act.detach().contiguous(), dst=1)
    if train:
        grad = torch.empty_like(act)
        dist.recv(grad, src=1)
        opt.zero_grad()
        act.backward(grad)
        opt.step()


def stage1_step(yb, train=True):
    dist.recv(act_buf, src=0)
    act = act_buf.clone().requires_grad_(train)
    logits = stage(act)
    loss = F.cross_entropy(logits, yb)
    if train:
        opt.zero_grad()
        loss.backward()
        dist.send(act.grad.contiguous(), dst=0)
        opt.step()
    correct = (logits.argmax(1) == yb).sum().item()
    return loss.item(), correct


# ---------------------------------------------------------------- train
os.makedirs(args.ckpt_dir, exist_ok=True)
for epoch in range(args.epochs):
    t0 = time.time()
    stage.train()
    tot_loss, n_batches = 0.0, 0
    for xb, yb in make_loader(train_ds, True, epoch):
        if rank == 0:
            stage0_step(xb)
        else:
            loss, _ = stage1_step(yb)
            tot_loss += loss
            n_batches += 1
    sched.step()

    stage.eval()
    correct = 0
    with torch.no_grad():
        for xb, yb in make_loader(val_ds, False, epoch):
            if rank == 0:
                stage0_step(xb, train=False)
            else:
                _, c = stage1_step(yb, train=False)
                correct += c
    if rank == 1:
        log(f"epoch {epoch} train_loss {tot_loss / max(1, n_batches):.4f} "
            f"val_acc {correct / len(val_ds):.3f} ({time.time() - t0:.1f}s)")
    torch.save({"epoch": epoch, "stage": stage.state_dict(), "opt": opt.state_dict()},
               os.path.join(args.ckpt_dir, f"stage{rank}.pt"))
    dist.barrier()

log("finished")
dist.destroy_process_group()
