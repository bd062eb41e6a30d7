#!/usr/bin/env python
# Small image classifier with a deep-supervision (auxiliary) head, Inception/GoogLeNet style.
# Rank 0 runs a quick validation pass every --eval-every steps.
#   torchrun --nproc-per-node 2 cnn_aux_eval.py
import argparse
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def get_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--aux-weight", type=float, default=0.3)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--n-train", type=int, default=2048)
    ap.add_argument("--n-val", type=int, default=256)
    ap.add_argument("--pg-timeout", type=int, default=10)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt"))
    return ap.parse_args()


def make_blobs(n, num_classes=10, seed=0):
    """Synthetic 3x32x32 'images': a class-dependent blob position plus noise."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = torch.randn(n, 3, 32, 32, generator=g) * 0.5
    for c in range(num_classes):
        idx = (y == c).nonzero(as_tuple=True)[0]
        r, col = (c // 4) * 8 + 4, (c % 4) * 8 + 4
        x[idx, c % 3, r:r + 6, col:col + 6] += 2.0
    return x, y


def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class AuxNet(nn.Module):
    def __init__(self, num_classes=10, aux_weight=0.3):
        super().__init__()
        self.aux_weight = aux_weight
        self.stage1 = nn.Sequential(conv_bn(3, 16), conv_bn(16, 32, 2))
        self.stage2 = nn.Sequential(conv_bn(32, 32), conv_bn(32, 64, 2))
        self.stage3 = nn.Sequential(conv_bn(64, 64), conv_bn(64, 64, 2))
        self.classifier = nn.Linear(64, num_classes)
        # auxiliary classifier on the intermediate features (only used while training)
        self.aux_head = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(64 * 4, 64),
                                      nn.ReLU(inplace=True), nn.Linear(64, num_classes))

    def forward(self, x):
        h = self.stage2(self.stage1(x))
        out = self.classifier(F.adaptive_avg_pool2d(self.stage3(h), 1).flatten(1))
        if self.training and self.aux_weight > 0:
            return out, self.aux_head(h)
        return out


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        net = AuxNet(aux_weight=args.aux_weight)
        self.model = DDP(net)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4,
                                   nesterov=True)
        xtr, ytr = make_blobs(args.n_train, seed=1)
        xva, yva = make_blobs(args.n_val, seed=2)
        self.train_ds = TensorDataset(xtr, ytr)
        self.sampler = DistributedSampler(self.train_ds, shuffle=True)
        self.train_dl = DataLoader(self.train_ds, batch_size=args.batch_size, sampler=self.sampler, drop_last=True)
        self.val_dl = DataLoader(TensorDataset(xva, yva), batch_size=128)
        steps = len(self.train_dl) * args.epochs
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, total_steps=steps)
        self.global_step = 0
        self.best_acc = 0.0

    def print0(self, *a):
        if self.rank == 0:
            print(*a, flush=True)

    def compute_loss(self, outputs, y):
        if isinstance(outputs, tuple):
            out, aux = outputs
            return F.cross_entropy(out, y) + self.args.aux_weight * F.cross_entropy(aux, y), out
        return F.cross_entropy(outputs, y), outputs

    @torch.no_grad()
    def evaluate(self):
        net = self.model.module  # plain module, so no DDP collectives from a single rank
        net.eval()
        correct = total = 0
        for x, y in self.val_dl:
            pred = net(x).argmax(1)
            correct += (pred == y).sum().item()
            total += y.numel()
        return correct / max(total, 1)

    def save(self, acc):
        os.makedirs(self.args.out, exist_ok=True)
        torch.save({"model": self.model.module.state_dict(), "step": self.global_step, "acc": acc},
                   os.path.join(self.args.out, "best.pt"))

    def train_one_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        t0 = time.time()
        for x, y in self.train_dl:
            outputs = self.model(x)
            loss, out = self.compute_loss(outputs, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            self.sched.step()
            self.global_step += 1
            if self.global_step % self.args.eval_every == 0 and self.rank == 0:
                acc = self.evaluate()
                if acc > self.best_acc:
                    self.best_acc = acc
                    self.save(acc)
                self.print0(f"ep {epoch} step {self.global_step} loss {loss.item():.3f} "
                            f"val_acc {acc:.3f} ({time.time() - t0:.1f}s)")
        stats = torch.tensor([loss.item()])
        dist.all_reduce(stats)
        self.print0(f"epoch {epoch} done, mean last loss {stats.item() / self.world:.3f}")

    def fit(self):
        for epoch in range(self.args.epochs):
            self.train_one_epoch(epoch)
        self.print0(f"best val acc {self.best_acc:.3f}")


def main():
    args = get_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    trainer = Trainer(args)
    trainer.fit()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
