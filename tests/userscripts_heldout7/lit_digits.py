"""Lightning-style module + hand-written loop: tiny conv net on 16x16 synthetic digits.

    torchrun --nproc-per-node 2 lit_digits.py

Features: DataLoader workers over a memory-mapped .npy file, gradient accumulation with
DDP.no_sync(), EMA weights for eval, rank-0 checkpointing with resume.
"""
import argparse
import copy
import logging
import os
import subprocess
import time
from contextlib import nullcontext
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
log = logging.getLogger("lit_digits")


class NpyDigits(Dataset):
    """Opens the memmap lazily so every DataLoader worker gets its own handle."""

    def __init__(self, images_path, labels_path):
        self.images_path = images_path
        self.labels = np.load(labels_path)
        self._images = None

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        if self._images is None:
            self._images = np.load(self.images_path, mmap_mode="r")
        img = torch.from_numpy(np.array(self._images[i], dtype=np.float32)).unsqueeze(0) / 255.0
        return img, int(self.labels[i])


class LitDigits(nn.Module):
    def __init__(self, lr=2e-3, n_classes=10):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * 4 * 4, 64), nn.ReLU(), nn.Linear(64, n_classes),
        )

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, model=None):
        x, y = batch
        logits = (model or self)(x)
        return F.cross_entropy(logits, y)

    @torch.no_grad()
    def validation_step(self, batch, model=None):
        x, y = batch
        logits = (model or self)(x)
        return torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                             (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)

    def configure_optimizers(self, total_steps):
        opt = torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9, nesterov=True)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
        return opt, sched


class EMA:
    def __init__(self, module, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(module).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module):
        for s, p in zip(self.shadow.parameters(), module.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def record_git_revision():
    try:
        return subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                                       stderr=subprocess.DEVNULL, text=True).strip()
    except Exception:
        log.exception("could not record git revision, continuing without it")
        return "unknown"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--ckpt", default="checkpoints/last.pt")
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s [rank{rank}] %(levelname)s %(message)s")
    torch.manual_seed(1234)
    revision = record_git_revision() if rank == 0 else None

    train_ds = NpyDigits(os.path.join(HERE, "data/train_x.npy"), os.path.join(HERE, "data/train_y.npy"))
    val_ds = NpyDigits(os.path.join(HERE, "data/val_x.npy"), os.path.join(HERE, "data/val_y.npy"))
    train_sampler = DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True)
    val_sampler = DistributedSampler(val_ds, num_replicas=world, rank=rank, shuffle=False, drop_last=True)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True,
                              num_workers=args.workers, persistent_workers=args.workers > 0)
    val_loader = DataLoader(val_ds, batch_size=128, sampler=val_sampler, num_workers=args.workers)

    lit = LitDigits()
    steps_per_epoch = len(train_loader) // args.accum
    opt, sched = lit.configure_optimizers(args.epochs * steps_per_epoch)
    start_epoch = 0
    ckpt_path = os.path.join(HERE, args.ckpt)
    if os.path.exists(ckpt_path):
        state = torch.load(ckpt_path, map_location="cpu", weights_only=True)
        lit.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start_epoch = state["epoch"] + 1
        log.info("resumed from %s at epoch %d", ckpt_path, start_epoch)
    model = DDP(lit)
    ema = EMA(lit)

    for epoch in range(start_epoch, args.epochs):
        t0 = time.time()
        train_sampler.set_epoch(epoch)
        model.train()
        for i, batch in enumerate(train_loader):
            boundary = (i + 1) % args.accum == 0
            with nullcontext() if boundary else model.no_sync():
                loss = lit.training_step(batch, model) / args.accum
                loss.backward()
            if boundary:
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema.update(lit)
                if (i + 1) % (10 * args.accum) == 0:
                    log.info("epoch %d it %d loss %.4f lr %.2e", epoch, i + 1, loss.item() * args.accum,
                             sched.get_last_lr()[0])

        totals = torch.zeros(3, dtype=torch.float64)
        for batch in val_loader:
            totals += lit.validation_step(batch, ema.shadow)
        dist.all_reduce(totals)
        log.info("epoch %d val_loss %.4f val_acc %.3f (ema) %.1fs", epoch, totals[0] / totals[2],
                 totals[1] / totals[2], time.time() - t0)

        if rank == 0:
            os.makedirs(os.path.dirname(ckpt_path), exist_ok=True)
            torch.save({"model": lit.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                        "epoch": epoch, "revision": revision}, ckpt_path + ".tmp")
            os.replace(ckpt_path + ".tmp", ckpt_path)
        dist.barrier()

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
