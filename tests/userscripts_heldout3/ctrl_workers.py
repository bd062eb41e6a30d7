"""Glyph classifier, written after the torchvision classification reference
(train_one_epoch / evaluate / MetricLogger), shrunk to run on CPU.

    torchrun --nproc-per-node 2 ctrl_workers.py --epochs 3
"""
import argparse
import datetime
import os
import time
from collections import defaultdict, deque

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class SmoothedValue:
    def __init__(self, window=20):
        self.deque, self.total, self.count = deque(maxlen=window), 0.0, 0

    def update(self, v, n=1):
        self.deque.append(v)
        self.total += v * n
        self.count += n

    def synchronize_between_processes(self):
        t = torch.tensor([self.count, self.total], dtype=torch.float64)
        dist.barrier()
        dist.all_reduce(t)
        self.count, self.total = int(t[0].item()), t[1].item()

    @property
    def global_avg(self):
        return self.total / max(1, self.count)


class MetricLogger:
    def __init__(self):
        self.meters = defaultdict(SmoothedValue)

    def update(self, n=1, **kw):
        for k, v in kw.items():
            self.meters[k].update(float(v), n)

    def synchronize_between_processes(self):
        for k in sorted(self.meters):
            self.meters[k].synchronize_between_processes()

    def __str__(self):
        return "  ".join(f"{k}: {m.global_avg:.4f}" for k, m in self.meters.items())


class GlyphDataset(Dataset):
    """Procedurally rendered 20x20 glyphs (10 classes) with random jitter/noise."""

    def __init__(self, n, train=True, seed=0):
        self.n, self.train = n, train
        # glyph shapes are fixed (font seed 0); the split seed only picks the labels
        self.templates = (np.random.RandomState(0).rand(10, 20, 20) > 0.7).astype(np.float32)
        self.labels = np.random.RandomState(seed).randint(0, 10, size=n)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        y = int(self.labels[i])
        img = self.templates[y]
        if self.train:  # augmentation uses the per-worker numpy RNG
            img = np.roll(img, shift=np.random.randint(-2, 3, size=2), axis=(0, 1))
            img = img + 0.3 * np.random.randn(*img.shape).astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(img))[None], y


def seed_worker(worker_id):
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 5 * 5, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def train_one_epoch(model, criterion, optimizer, loader, epoch, args):
    model.train()
    ml = MetricLogger()
    for i, (x, y) in enumerate(loader):
        out = model(x)
        loss = criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()
        acc = (out.argmax(1) == y).float().mean().item()
        ml.update(n=x.size(0), loss=loss.item(), acc1=acc)
        if args.rank == 0 and i % args.print_freq == 0:
            print(f"Epoch: [{epoch}] [{i}/{len(loader)}] {ml}", flush=True)
    return ml


@torch.no_grad()
def evaluate(model, criterion, loader):
    model.eval()
    ml = MetricLogger()
    for x, y in loader:
        out = model(x)
        ml.update(n=x.size(0), loss=criterion(out, y).item(), acc1=(out.argmax(1) == y).float().mean().item())
    ml.synchronize_between_processes()
    return ml


def save_on_master(obj, path, rank):
    if rank != 0:
        return
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)  # never leave a half-written checkpoint behind


def get_args_parser():
    p = argparse.ArgumentParser("glyph classification", add_help=True)
    p.add_argument("--epochs", default=3, type=int)
    p.add_argument("-b", "--batch-size", default=32, type=int)
    p.add_argument("-j", "--workers", default=2, type=int)
    p.add_argument("--lr", default=0.05, type=float)
    p.add_argument("--clip-grad-norm", default=5.0, type=float)
    p.add_argument("--print-freq", default=40, type=int)
    p.add_argument("--output-dir", default="out/glyph")
    p.add_argument("--pg-timeout", default=10, type=int)
    return p


def main(args):
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.pg_timeout))
    args.rank, args.world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    torch.set_num_threads(1)
    if args.rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)

    train_ds, val_ds = GlyphDataset(4096, train=True, seed=1), GlyphDataset(512, train=False, seed=2)
    train_sampler = DistributedSampler(train_ds, shuffle=True)
    val_sampler = DistributedSampler(val_ds, shuffle=False)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler,
                              num_workers=args.workers, worker_init_fn=seed_worker,
                              persistent_workers=args.workers > 0, drop_last=True)
    val_loader = DataLoader(val_ds, batch_size=128, sampler=val_sampler, num_workers=0)

    model = DDP(Net(), find_unused_parameters=True)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)

    start = time.time()
    best = 0.0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        train_one_epoch(model, criterion, optimizer, train_loader, epoch, args)
        lr_scheduler.step()
        val = evaluate(model, criterion, val_loader)
        acc = val.meters["acc1"].global_avg
        if args.rank == 0:
            print(f"Test: epoch {epoch} {val}", flush=True)
        best = max(best, acc)  # same value on every rank after synchronize
        ckpt = {"model": model.module.state_dict(), "optimizer": optimizer.state_dict(),
                "lr_scheduler": lr_scheduler.state_dict(), "epoch": epoch, "best_acc1": best}
        save_on_master(ckpt, os.path.join(args.output_dir, "checkpoint.pth"), args.rank)
    if args.rank == 0:
        print(f"Training time {datetime.timedelta(seconds=int(time.time() - start))}, best acc1 {best:.4f}",
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(get_args_parser().parse_args())
