"""Train a small text-classifier-ish MLP with a Trainer class.

Supports both `python resume_rng.py` (single process, handy for debugging) and
`torchrun --nproc-per-node N resume_rng.py`.  Checkpoints go to --ckpt-dir and the
run resumes automatically from `last.pt` if it exists (--resume auto).
"""
import argparse
import os
import random
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--resume", default="auto", help="'auto', 'none' or a path")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def make_data(n=4096, dim=32, classes=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, dim, generator=g) * 2.0
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, dim, generator=g)
    return TensorDataset(x, y)


class Classifier(nn.Module):
    def __init__(self, dim, hidden, classes, p_drop=0.1):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.drop = nn.Dropout(p_drop)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.drop(F.gelu(self.fc1(x)))
        x = self.drop(F.gelu(self.fc2(x)))
        return self.out(x)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.distributed = "RANK" in os.environ and "WORLD_SIZE" in os.environ
        if self.distributed:
            dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
            self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        else:
            self.rank, self.world_size = 0, 1

        torch.manual_seed(args.seed)
        random.seed(args.seed + self.rank)
        self.dataset = make_data()
        self.sampler = (DistributedSampler(self.dataset, shuffle=True, seed=args.seed)
                        if self.distributed else None)
        self.loader = DataLoader(self.dataset, batch_size=args.batch_size,
                                 sampler=self.sampler, shuffle=self.sampler is None, drop_last=True)

        model = Classifier(32, args.hidden, 5)
        self.model = DDP(model) if self.distributed else model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        steps = args.epochs * len(self.loader)
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(self.optimizer, T_max=steps)
        self.start_epoch = 0
        self.global_step = 0
        os.makedirs(args.ckpt_dir, exist_ok=True)
        self._maybe_resume()

    def log(self, msg):
        if self.rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    @property
    def raw_model(self):
        return self.model.module if isinstance(self.model, DDP) else self.model

    # ------------------------------------------------------------------ ckpt
    def _rng_states(self):
        """Collect the torch RNG state of every rank so dropout replays exactly."""
        state = torch.get_rng_state()
        if not self.distributed:
            return [state]
        states = [None] * self.world_size
        dist.all_gather_object(states, state)
        return states

    def save_checkpoint(self, epoch):
        rng = self._rng_states()
        if self.rank != 0:
            return
        ckpt = {
            "model": self.raw_model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "epoch": epoch,
            "global_step": self.global_step,
            "rng_states": rng,
        }
        tmp = os.path.join(self.args.ckpt_dir, "last.pt.tmp")
        torch.save(ckpt, tmp)
        os.replace(tmp, os.path.join(self.args.ckpt_dir, "last.pt"))
        self.log(f"saved checkpoint for epoch {epoch}")

    def _maybe_resume(self):
        path = self.args.resume
        if path == "none":
            return
        if path == "auto":
            path = os.path.join(self.args.ckpt_dir, "last.pt")
            if not os.path.exists(path):
                self.log("no checkpoint found, starting from scratch")
                return
        ckpt = torch.load(path, map_location="cpu")
        self.raw_model.load_state_dict(ckpt["model"])
        self.optimizer.load_state_dict(ckpt["optimizer"])
        self.scheduler.load_state_dict(ckpt["scheduler"])
        self.start_epoch = ckpt["epoch"] + 1
        self.global_step = ckpt["global_step"]
        torch.set_rng_state(ckpt["rng_states"][self.rank])
        self.log(f"resumed from {path} at epoch {self.start_epoch}")

    # ----------------------------------------------------------------- train
    def train_epoch(self, epoch):
        self.model.train()
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)
        total, correct, loss_sum = 0, 0, 0.0
        for x, y in self.loader:
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.scheduler.step()
            self.global_step += 1
            loss_sum += loss.item() * y.numel()
            correct += (logits.argmax(1) == y).sum().item()
            total += y.numel()
        stats = torch.tensor([loss_sum, correct, total], dtype=torch.float64)
        if self.distributed:
            dist.all_reduce(stats)
        return stats[0].item() / stats[2].item(), stats[1].item() / stats[2].item()

    def fit(self):
        self.log(f"world_size={self.world_size} steps/epoch={len(self.loader)}")
        for epoch in range(self.start_epoch, self.args.epochs):
            t0 = time.time()
            loss, acc = self.train_epoch(epoch)
            self.log(f"epoch {epoch} loss {loss:.4f} acc {acc:.3f} "
                     f"lr {self.scheduler.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")
            self.save_checkpoint(epoch)

    def close(self):
        if self.distributed:
            dist.barrier()
            dist.destroy_process_group()


def main():
    args = parse_args()
    trainer = Trainer(args)
    trainer.fit()
    trainer.close()


if __name__ == "__main__":
    main()
