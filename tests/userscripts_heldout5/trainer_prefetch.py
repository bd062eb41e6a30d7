"""Sensor regression with a small MLP: Trainer class + background batch prefetcher.

torchrun --nproc-per-node 2 trainer_prefetch.py
"""
import argparse
import logging
import os
import queue
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

HERE = os.path.dirname(os.path.abspath(__file__))
logging.basicConfig(level=logging.INFO, format="%(asctime)s [rank%(rank)s] %(message)s")


class RankFilter(logging.Filter):
    def filter(self, record):
        record.rank = os.environ.get("RANK", "?")
        return True


log = logging.getLogger("trainer")
log.addFilter(RankFilter())


def load_csv_shard(path, rank, world):
    """Each rank keeps every world-th row, so the CSV is read once and never copied."""
    rows = []
    with open(path) as f:
        next(f)  # header
        for i, line in enumerate(f):
            if i % world == rank:
                rows.append([float(v) for v in line.strip().split(",")])
    return rows


class Prefetcher:
    """Builds batches on a background thread so the training step never waits on parsing."""

    def __init__(self, rows, batch_size, shuffle=True, depth=4, seed=0):
        self.rows = rows
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.depth = depth
        self.seed = seed
        self.epoch = 0

    def __len__(self):
        return len(self.rows) // self.batch_size

    def _produce(self, q, order):
        for b in range(len(self)):
            idx = order[b * self.batch_size:(b + 1) * self.batch_size]
            block = torch.tensor([self.rows[i] for i in idx], dtype=torch.float32)
            q.put((block[:, :-1].contiguous(), block[:, -1:].contiguous()))
        q.put(None)

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.rows), generator=g).tolist() if self.shuffle else list(range(len(self.rows)))
        q = queue.Queue(maxsize=self.depth)
        t = threading.Thread(target=self._produce, args=(q, order), daemon=True, name="prefetch")
        t.start()
        while True:
            item = q.get()
            if item is None:
                break
            yield item
        self.epoch += 1


class Trainer:
    def __init__(self, args):
        self.args = args
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        torch.manual_seed(args.seed)
        torch.set_num_threads(1)

        rows = load_csv_shard(os.path.join(HERE, "data", "sensors.csv"), self.rank, self.world)
        n_val = len(rows) // 10
        self.train_loader = Prefetcher(rows[n_val:], args.batch_size, shuffle=True, seed=args.seed)
        self.val_loader = Prefetcher(rows[:n_val], args.batch_size, shuffle=False)
        n_feat = len(rows[0]) - 1

        net = nn.Sequential(
            nn.Linear(n_feat, args.hidden), nn.SiLU(),
            nn.Linear(args.hidden, args.hidden), nn.SiLU(),
            nn.Linear(args.hidden, 1),
        )
        self.model = DDP(net)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9, nesterov=True)
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(
            self.opt, T_max=args.epochs * len(self.train_loader))
        self.loss_fn = nn.SmoothL1Loss()
        self.step = 0
        if self.rank == 0:
            log.info("train rows/rank=%d val rows/rank=%d features=%d",
                     len(rows) - n_val, n_val, n_feat)

    def train_epoch(self, epoch):
        self.model.train()
        tot, n = 0.0, 0
        for x, y in self.train_loader:
            loss = self.loss_fn(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            gnorm = nn.utils.clip_grad_norm_(self.model.parameters(), self.args.clip)
            self.opt.step()
            self.sched.step()
            self.step += 1
            tot += loss.item() * len(x)
            n += len(x)
            if self.step % self.args.log_every == 0 and self.rank == 0:
                log.info("epoch %d step %d loss %.4f gnorm %.3f lr %.4f",
                         epoch, self.step, loss.item(), gnorm, self.sched.get_last_lr()[0])
        return tot / max(n, 1)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        stats = torch.zeros(2)
        for x, y in self.val_loader:
            stats[0] += ((self.model.module(x) - y) ** 2).sum()
            stats[1] += len(x)
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def save(self, epoch):
        if self.rank == 0:
            os.makedirs(os.path.join(HERE, "checkpoints"), exist_ok=True)
            torch.save({"model": self.model.module.state_dict(), "opt": self.opt.state_dict(),
                        "epoch": epoch}, os.path.join(HERE, "checkpoints", "last.pt"))
        dist.barrier()

    def fit(self):
        t0 = time.time()
        for epoch in range(self.args.epochs):
            train_loss = self.train_epoch(epoch)
            val_mse = self.evaluate()
            if self.rank == 0:
                log.info("epoch %d train %.4f val_mse %.4f (%.1fs)", epoch, train_loss, val_mse, time.time() - t0)
            self.save(epoch)
        dist.destroy_process_group()


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--clip", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


if __name__ == "__main__":
    Trainer(parse()).fit()
