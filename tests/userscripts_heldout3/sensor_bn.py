# IMU activity recognition - 1D CNN over sliding windows
# run: torchrun --nproc-per-node 2 sensor_bn.py   (data from setup/sensor_bn.sh)
import argparse
import os
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler
from torch.utils.data.dataloader import default_collate

parser = argparse.ArgumentParser()
parser.add_argument("--csv", default="data/imu_session.csv")
parser.add_argument("--window", type=int, default=64)
parser.add_argument("--stride", type=int, default=32)
parser.add_argument("--batch-size", type=int, default=8)
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--out", default="runs/imu_cnn")
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(0)
torch.set_num_threads(1)


def log(*a):
    if rank == 0:
        print(*a, flush=True)


# ---------------- data ----------------
raw = np.genfromtxt(args.csv, delimiter=",", skip_header=1)  # empty fields -> nan
signals = raw[:, 1:7].astype(np.float32)
labels = raw[:, 7].astype(np.int64)
mu = np.nanmean(signals, axis=0)
sd = np.nanstd(signals, axis=0) + 1e-6
signals = (signals - mu) / sd
log(f"loaded {len(signals)} rows, {np.isnan(signals).any(axis=1).sum()} rows with missing values")


class WindowDataset(Dataset):
    def __init__(self, x, y, window, stride):
        self.x, self.y = x, y
        self.window, self.stride = window, stride
        self.n = (len(x) - window) // stride + 1

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        s = i * self.stride
        w = self.x[s:s + self.window]
        if np.isnan(w).any():
            return None  # gap in the recording, skip this window
        # label = activity at the end of the window
        return torch.from_numpy(w.T.copy()), int(self.y[s + self.window - 1])


def skip_none_collate(batch):
    batch = [b for b in batch if b is not None]
    if len(batch) == 0:
        return None
    return default_collate(batch)


dataset = WindowDataset(signals, labels, args.window, args.stride)
# time series -> keep the temporal order, no shuffling
sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                    collate_fn=skip_none_collate, persistent_workers=args.workers > 0)
log(f"{len(dataset)} windows, {len(loader)} batches/rank/epoch")


# ---------------- model ----------------
class ConvBlock(nn.Module):
    def __init__(self, cin, cout, k=5):
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, k, padding=k // 2)
        self.bn = nn.BatchNorm1d(cout)

    def forward(self, x):
        return F.max_pool1d(F.relu(self.bn(self.conv(x))), 2)


class IMUNet(nn.Module):
    def __init__(self, n_ch=6, n_cls=4):
        super().__init__()
        self.features = nn.Sequential(ConvBlock(n_ch, 32), ConvBlock(32, 64), ConvBlock(64, 64))
        self.head = nn.Sequential(
            nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, n_cls)
        )

    def forward(self, x):
        x = self.features(x)
        x = x.mean(dim=-1)  # global average pool
        return self.head(x)


model = DDP(IMUNet())
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.3)

# ---------------- train ----------------
if rank == 0:
    os.makedirs(args.out, exist_ok=True)

step = 0
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    model.train()
    tot_loss = torch.zeros(1)
    correct = torch.zeros(1)
    seen = torch.zeros(1)
    t0 = time.time()
    for batch in loader:
        if batch is None:
            continue
        x, y = batch
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        tot_loss += loss.item() * len(y)
        correct += (logits.argmax(1) == y).sum().item()
        seen += len(y)
        if step % 10 == 0:
            log(f"epoch {epoch} step {step} loss {loss.item():.4f}")
    scheduler.step()

    stats = torch.cat([tot_loss, correct, seen])
    dist.all_reduce(stats)
    log(f"== epoch {epoch}: loss {stats[0] / stats[2]:.4f} acc {stats[1] / stats[2]:.3f} "
        f"({time.time() - t0:.1f}s)")

    if rank == 0:
        torch.save({"epoch": epoch, "model": model.module.state_dict()},
                   os.path.join(args.out, "last.pt"))

dist.barrier()
log("done")
dist.destroy_process_group()
