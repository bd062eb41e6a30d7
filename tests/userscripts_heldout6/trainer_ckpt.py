"""DDP trainer for the tabular churn classifier.

Usage: torchrun --nproc-per-node 2 trainer_ckpt.py [--epochs 4]
Keeps the best checkpoint (by val accuracy) and exports a standalone
TorchScript copy of it for the serving team.
"""
import argparse
import os
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
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs", "churn"))
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


class ChurnNet(nn.Module):
    def __init__(self, n_features=24, hidden=128, n_classes=2):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(n_features, hidden), nn.ReLU(), nn.Dropout(0.1),
            nn.Linear(hidden, hidden), nn.ReLU(),
        )
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x):
        return self.head(self.body(x))


def make_data(seed, n=4096, d=24):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=g)
    y = ((x @ w + 0.3 * torch.randn(n, generator=g)) > 0).long()
    split = int(0.85 * n)
    return TensorDataset(x[:split], y[:split]), TensorDataset(x[split:], y[split:])


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.is_main = self.rank == 0
        torch.manual_seed(args.seed)

        train_ds, val_ds = make_data(args.seed)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.val_sampler = DistributedSampler(val_ds, shuffle=False)
        self.train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.train_sampler)
        self.val_dl = DataLoader(val_ds, batch_size=256, sampler=self.val_sampler)

        self.model = DDP(ChurnNet(hidden=args.hidden))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=1e-4)
        steps = args.epochs * len(self.train_dl)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, total_steps=steps)
        self.best_acc = 0.0
        self.global_step = 0
        if self.is_main:
            os.makedirs(args.out_dir, exist_ok=True)

    def log(self, msg):
        if self.is_main:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def train_epoch(self, epoch):
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        running = torch.zeros(2)
        for x, y in self.train_dl:
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.sched.step()
            self.global_step += 1
            running += torch.tensor([loss.item() * len(y), len(y)])
        dist.all_reduce(running)
        return (running[0] / running[1]).item()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        stats = torch.zeros(2)
        for x, y in self.val_dl:
            pred = self.model(x).argmax(-1)
            stats += torch.tensor([(pred == y).sum().item(), len(y)], dtype=torch.float)
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    def save_checkpoint(self, epoch, acc):
        ckpt = {
            "epoch": epoch,
            "model": self.model.state_dict(),
            "optimizer": self.opt.state_dict(),
            "scheduler": self.sched.state_dict(),
            "val_acc": acc,
            "hidden": self.args.hidden,
        }
        path = os.path.join(self.args.out_dir, "best.pt")
        torch.save(ckpt, path + ".tmp")
        os.replace(path + ".tmp", path)
        return path

    def export_for_serving(self, ckpt_path):
        # standalone copy without the DDP wrapper, loaded from disk so we are
        # sure the file on disk is what gets shipped
        ckpt = torch.load(ckpt_path, map_location="cpu")
        net = ChurnNet(hidden=ckpt["hidden"])
        net.load_state_dict(ckpt["model"])
        net.eval()
        scripted = torch.jit.script(net)
        out = os.path.join(self.args.out_dir, "churn_serving.pt")
        scripted.save(out)
        self.log(f"exported serving model to {out}")

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            loss = self.train_epoch(epoch)
            acc = self.validate()
            self.log(f"epoch {epoch} loss {loss:.4f} val_acc {acc:.4f} "
                     f"lr {self.sched.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")
            if acc > self.best_acc:
                self.best_acc = acc
                if self.is_main:
                    path = self.save_checkpoint(epoch, acc)
                    self.export_for_serving(path)
        self.log(f"done, best val_acc {self.best_acc:.4f}")


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
