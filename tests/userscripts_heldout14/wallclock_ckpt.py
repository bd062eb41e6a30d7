"""Tabular regression trainer with wall-clock checkpointing.

Checkpoints are written every --ckpt-interval-s seconds so that a preempted
job never loses more than a few minutes of work, regardless of epoch length.

    torchrun --nproc-per-node 2 wallclock_ckpt.py
"""
import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--n-train", type=int, default=40000)
    p.add_argument("--n-val", type=int, default=8000)
    p.add_argument("--ckpt-dir", default="checkpoints")
    p.add_argument("--ckpt-interval-s", type=float, default=6.0)
    p.add_argument("--eval-before-train", action="store_true", default=True)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 32, generator=g)
    w = torch.linspace(-1, 1, 32)
    y = (x @ w).unsqueeze(1) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class MLP(nn.Module):
    def __init__(self, d_in=32, hidden=256):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.GELU(),
            nn.Linear(hidden, hidden), nn.GELU(),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.is_main = self.rank == 0

        torch.manual_seed(0)
        self.model = DDP(MLP())
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.loss_fn = nn.MSELoss()

        train_ds = make_data(args.n_train, seed=1)
        self.sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
        self.train_loader = DataLoader(train_ds, batch_size=args.batch_size,
                                       sampler=self.sampler, drop_last=True)
        # full validation set, evaluated on the main process only
        self.val_loader = DataLoader(make_data(args.n_val, seed=2), batch_size=256)

        self.global_step = 0
        self.running_loss = 0.0
        self.running_n = 0
        self.last_ckpt_time = None
        os.makedirs(args.ckpt_dir, exist_ok=True)

    def log(self, msg):
        if self.is_main:
            print(f"[trainer] {msg}", flush=True)

    @torch.no_grad()
    def evaluate(self):
        net = self.model.module
        net.eval()
        total, n = 0.0, 0
        for x, y in self.val_loader:
            total += self.loss_fn(net(x), y).item() * len(x)
            n += len(x)
        net.train()
        return total / n

    def _time_for_checkpoint(self):
        return time.monotonic() - self.last_ckpt_time >= self.args.ckpt_interval_s

    def save_checkpoint(self):
        # average the running loss over ranks so the checkpoint records the global value
        stats = torch.tensor([self.running_loss, float(self.running_n)])
        dist.all_reduce(stats)
        avg = (stats[0] / stats[1].clamp(min=1)).item()
        if self.is_main:
            path = os.path.join(self.args.ckpt_dir, f"step_{self.global_step:07d}.pt")
            torch.save({
                "model": self.model.module.state_dict(),
                "optim": self.opt.state_dict(),
                "step": self.global_step,
                "train_loss": avg,
            }, path + ".tmp")
            os.replace(path + ".tmp", path)
            self.log(f"saved {path} (train_loss={avg:.4f})")
        dist.barrier()
        self.running_loss, self.running_n = 0.0, 0
        self.last_ckpt_time = time.monotonic()

    def train_epoch(self, epoch):
        self.sampler.set_epoch(epoch)
        self.model.train()
        t0 = time.time()
        for x, y in self.train_loader:
            loss = self.loss_fn(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.global_step += 1
            self.running_loss += loss.item() * len(x)
            self.running_n += len(x)

            if self.global_step % 100 == 0:
                self.log(f"epoch {epoch} step {self.global_step} loss {loss.item():.4f}")
            if self._time_for_checkpoint():
                self.save_checkpoint()
        self.log(f"epoch {epoch} done in {time.time() - t0:.1f}s")

    def fit(self):
        if self.is_main and self.args.eval_before_train:
            self.log(f"baseline val loss {self.evaluate():.4f}")
        self.last_ckpt_time = time.monotonic()
        for epoch in range(self.args.epochs):
            self.train_epoch(epoch)
            if self.is_main:
                self.log(f"epoch {epoch} val loss {self.evaluate():.4f}")
            dist.barrier()
        self.save_checkpoint()


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    try:
        trainer = Trainer(args)
        trainer.fit()
        trainer.log("training finished")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
