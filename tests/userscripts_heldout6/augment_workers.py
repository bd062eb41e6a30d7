# Train a small 1D-CNN on the sensor windows with random augmentation.
# torchrun --nproc-per-node 2 augment_workers.py
import argparse
import os
import random
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))

parser = argparse.ArgumentParser()
parser.add_argument("--data", default=os.path.join(HERE, "data", "sensors.npz"))
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--bs", type=int, default=32)
parser.add_argument("--lr", type=float, default=1e-3)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.set_num_threads(1)


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def worker_init_fn(worker_id):
    # every worker gets its own numpy / random stream so augmentations
    # are not duplicated across workers
    seed = torch.initial_seed()
    np.random.seed(seed)
    random.seed(seed)


class SensorWindows(Dataset):
    def __init__(self, path, split, augment=False):
        blob = np.load(path)
        self.x = blob[f"x_{split}"].astype(np.float32)
        self.y = blob[f"y_{split}"].astype(np.int64)
        self.augment = augment

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i].copy()
        if self.augment:
            # random time shift + amplitude jitter + gaussian noise
            shift = np.random.randint(-8, 9)
            x = np.roll(x, shift, axis=-1)
            x *= np.random.uniform(0.8, 1.2)
            x += np.random.normal(0, 0.05, size=x.shape).astype(np.float32)
        return torch.from_numpy(x), torch.tensor(self.y[i])


class ConvNet(nn.Module):
    def __init__(self, in_ch=3, n_classes=6):
        super().__init__()
        self.c1 = nn.Conv1d(in_ch, 32, 7, padding=3)
        self.c2 = nn.Conv1d(32, 64, 5, padding=2)
        self.c3 = nn.Conv1d(64, 64, 3, padding=1)
        self.fc = nn.Linear(64, n_classes)

    def forward(self, x):
        x = F.max_pool1d(F.relu(self.c1(x)), 2)
        x = F.max_pool1d(F.relu(self.c2(x)), 2)
        x = F.relu(self.c3(x)).mean(-1)
        return self.fc(x)


seed_everything(args.seed)
train_ds = SensorWindows(args.data, "train", augment=True)
val_ds = SensorWindows(args.data, "val")
train_sampler = DistributedSampler(train_ds, num_replicas=world_size, rank=rank, shuffle=True)
val_sampler = DistributedSampler(val_ds, num_replicas=world_size, rank=rank, shuffle=False)
train_loader = DataLoader(train_ds, batch_size=args.bs, sampler=train_sampler,
                          num_workers=args.workers, worker_init_fn=worker_init_fn,
                          persistent_workers=args.workers > 0, drop_last=True)
val_loader = DataLoader(val_ds, batch_size=128, sampler=val_sampler, num_workers=0)

model = DDP(ConvNet(in_ch=train_ds.x.shape[1]))
optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)

if rank == 0:
    print(f"train {len(train_ds)} val {len(val_ds)} world {world_size} "
          f"steps/epoch {len(train_loader)}", flush=True)

for epoch in range(args.epochs):
    model.train()
    train_sampler.set_epoch(epoch)
    t0 = time.time()
    tot_loss, n_seen = 0.0, 0
    for step, (xb, yb) in enumerate(train_loader):
        out = model(xb)
        loss = F.cross_entropy(out, yb, label_smoothing=0.05)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tot_loss += loss.item() * len(yb)
        n_seen += len(yb)
        if rank == 0 and step % 20 == 0:
            print(f"  ep {epoch} step {step} loss {loss.item():.4f}", flush=True)
    scheduler.step()

    model.eval()
    correct = torch.zeros(1)
    count = torch.zeros(1)
    with torch.no_grad():
        for xb, yb in val_loader:
            correct += (model(xb).argmax(1) == yb).sum()
            count += len(yb)
    loss_t = torch.tensor([tot_loss, n_seen], dtype=torch.float64)
    dist.all_reduce(correct)
    dist.all_reduce(count)
    dist.all_reduce(loss_t)
    if rank == 0:
        print(f"epoch {epoch}: train_loss {loss_t[0] / loss_t[1]:.4f} "
              f"val_acc {(correct / count).item():.4f} time {time.time() - t0:.1f}s", flush=True)

if rank == 0:
    torch.save(model.module.state_dict(), os.path.join(HERE, "data", "convnet.pt"))
    print("saved", flush=True)
dist.destroy_process_group()
