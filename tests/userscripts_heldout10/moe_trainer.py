"""Sparse mixture-of-experts classifier, data parallel over ranks.

We keep our own gradient sync instead of DDP: the experts are only touched by the
samples routed to them, and a single flat all-reduce per step is cheaper than
DDP's bucket bookkeeping for this tiny model.

    torchrun --nproc-per-node 2 moe_trainer.py
"""
import argparse
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--num-experts", type=int, default=8)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--aux-weight", type=float, default=0.01)
    p.add_argument("--n-samples", type=int, default=4096)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=1234)
    return p.parse_args()


class Expert(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MoEClassifier(nn.Module):
    def __init__(self, in_dim, d, n_experts, n_classes):
        super().__init__()
        self.embed = nn.Linear(in_dim, d)
        self.router = nn.Linear(d, n_experts)
        self.experts = nn.ModuleList([Expert(d, 2 * d) for _ in range(n_experts)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, n_classes)
        self.n_experts = n_experts

    def forward(self, x):
        h = self.embed(x)
        probs = self.router(h).softmax(dim=-1)
        gate, choice = probs.max(dim=-1)          # top-1 routing
        out = torch.zeros_like(h)
        for e, expert in enumerate(self.experts):
            idx = (choice == e).nonzero(as_tuple=True)[0]
            if idx.numel() == 0:
                continue
            out[idx] = gate[idx, None] * expert(h[idx])
        h = self.norm(h + out)
        # switch-transformer style load balancing loss
        frac = F.one_hot(choice, self.n_experts).float().mean(0)
        aux = self.n_experts * (frac * probs.mean(0)).sum()
        return self.head(h), aux, choice


def make_data(n, in_dim, n_classes, seed):
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(n_classes, in_dim, generator=g) * 2.0
    y = torch.randint(0, n_classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, in_dim, generator=g)
    return x, y


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        torch.manual_seed(args.seed)
        self.model = MoEClassifier(20, args.hidden, args.num_experts, 10)
        self._broadcast_params()
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        x, y = make_data(args.n_samples, 20, 10, args.seed)
        per_rank = args.n_samples // self.world
        lo = self.rank * per_rank
        self.x, self.y = x[lo:lo + per_rank], y[lo:lo + per_rank]
        self.steps_per_epoch = per_rank // args.batch_size
        total = self.steps_per_epoch * args.epochs
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * s / total)))
        self.expert_load = torch.zeros(args.num_experts)

    def log(self, msg):
        if self.rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def _broadcast_params(self):
        for p in self.model.parameters():
            dist.broadcast(p.data, src=0)

    def _allreduce_grads(self):
        # one flat buffer -> one collective per step
        grads = [p.grad for p in self.model.parameters() if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        flat.div_(self.world)
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset:offset + n].view_as(g))
            offset += n

    def train_epoch(self, epoch):
        self.model.train()
        g = torch.Generator().manual_seed(self.args.seed + 100 * epoch + self.rank)
        perm = torch.randperm(len(self.x), generator=g)
        running, correct, seen = 0.0, 0, 0
        for step in range(self.steps_per_epoch):
            idx = perm[step * self.args.batch_size:(step + 1) * self.args.batch_size]
            xb, yb = self.x[idx], self.y[idx]
            logits, aux, choice = self.model(xb)
            loss = F.cross_entropy(logits, yb) + self.args.aux_weight * aux
            self.opt.zero_grad()
            loss.backward()
            self._allreduce_grads()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.sched.step()
            self.expert_load += torch.bincount(choice, minlength=self.args.num_experts).float()
            running += loss.item()
            correct += (logits.argmax(-1) == yb).sum().item()
            seen += len(yb)
            if step % 20 == 0:
                self.log(f"epoch {epoch} step {step}/{self.steps_per_epoch} "
                         f"loss {running / (step + 1):.4f} lr {self.sched.get_last_lr()[0]:.2e}")
        stats = torch.tensor([running, correct, seen], dtype=torch.float64)
        dist.all_reduce(stats)
        return stats[0].item() / (self.steps_per_epoch * self.world), stats[1].item() / stats[2].item()

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            loss, acc = self.train_epoch(epoch)
            load = self.expert_load.clone()
            dist.all_reduce(load)
            share = (load / load.sum()).tolist()
            self.log(f"epoch {epoch} done in {time.time() - t0:.1f}s loss {loss:.4f} acc {acc:.3f} "
                     f"expert share {[round(s, 3) for s in share]}")
            self.expert_load.zero_()
        if self.rank == 0:
            os.makedirs("checkpoints", exist_ok=True)
            torch.save(self.model.state_dict(), "checkpoints/moe_final.pt")


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
