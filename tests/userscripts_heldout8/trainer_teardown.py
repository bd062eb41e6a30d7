"""Tabular regression (synthetic housing-like data) with a small Trainer class.

    torchrun --nproc-per-node 2 trainer_teardown.py --epochs 4
"""
import argparse
import logging
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, random_split
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger("trainer")


def make_data(n=12000, d=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, 1, generator=g)
    y = x @ w + 0.3 * torch.sin(3 * x[:, :1]) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


class MLP(nn.Module):
    def __init__(self, d_in, hidden=128, p=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_in, hidden), nn.GELU(), nn.Dropout(p),
            nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(p),
            nn.Linear(hidden, 1),
        )

    def forward(self, x):
        return self.net(x)


class Trainer:
    def __init__(self, model, train_ds, val_ds, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.model = DDP(model)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_dl = DataLoader(train_ds, batch_size=args.batch_size,
                                   sampler=self.train_sampler, num_workers=0)
        self.val_dl = DataLoader(val_ds, batch_size=256,
                                 sampler=DistributedSampler(val_ds, shuffle=False))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.sched = torch.optim.lr_scheduler.StepLR(self.opt, step_size=2, gamma=0.5)
        self.loss_fn = nn.MSELoss()
        self.history = []
        self.best_val = float("inf")

    @property
    def is_main(self):
        return self.rank == 0

    def _reduce_mean(self, total, count):
        t = torch.tensor([total, count], dtype=torch.float64)
        dist.all_reduce(t)
        return (t[0] / t[1]).item()

    def train_epoch(self, epoch):
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        total, count = 0.0, 0
        for step, (x, y) in enumerate(self.train_dl):
            pred = self.model(x)
            loss = self.loss_fn(pred, y)
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            total += loss.item() * len(x)
            count += len(x)
            if self.is_main and step % self.args.log_every == 0:
                logger.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        self.sched.step()
        return self._reduce_mean(total, count)

    @torch.no_grad()
    def evaluate(self, loader=None):
        loader = loader or self.val_dl
        self.model.eval()
        total, count = 0.0, 0
        for x, y in loader:
            total += nn.functional.mse_loss(self.model(x), y, reduction="sum").item()
            count += len(x)
        return self._reduce_mean(total, count)

    def save(self, path):
        if self.is_main:
            torch.save({"model": self.model.module.state_dict(),
                        "opt": self.opt.state_dict(),
                        "history": self.history}, path)

    def _teardown(self):
        # free the process group even if training blew up, so torchrun does not hang
        if dist.is_initialized():
            dist.destroy_process_group()

    def fit(self):
        os.makedirs(self.args.out_dir, exist_ok=True)
        try:
            for epoch in range(self.args.epochs):
                t0 = time.time()
                train_loss = self.train_epoch(epoch)
                val_loss = self.evaluate()
                self.history.append((epoch, train_loss, val_loss))
                if self.is_main:
                    logger.info("epoch %d train %.4f val %.4f lr %.1e (%.1fs)", epoch, train_loss,
                                val_loss, self.sched.get_last_lr()[0], time.time() - t0)
                if val_loss < self.best_val:
                    self.best_val = val_loss
                    self.save(os.path.join(self.args.out_dir, "best.pt"))
        finally:
            self._teardown()
        return self.history


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--out-dir", default="outputs")
    p.add_argument("--log-every", type=int, default=40)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s [rank{rank}] %(message)s")
    torch.manual_seed(args.seed)

    full = make_data()
    n_test = len(full) // 10
    n_val = len(full) // 10
    train_ds, val_ds, test_ds = random_split(
        full, [len(full) - n_val - n_test, n_val, n_test],
        generator=torch.Generator().manual_seed(args.seed))

    trainer = Trainer(MLP(full.tensors[0].shape[1]), train_ds, val_ds, args)
    trainer.fit()

    test_dl = DataLoader(test_ds, batch_size=256, sampler=DistributedSampler(test_ds, shuffle=False))
    test_mse = trainer.evaluate(test_dl)
    if rank == 0:
        logger.info("test mse %.4f (best val %.4f)", test_mse, trainer.best_val)


if __name__ == "__main__":
    main()
