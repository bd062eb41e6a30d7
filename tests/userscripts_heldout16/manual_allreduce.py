"""Regression model trained with hand-rolled data parallelism (no DDP wrapper).

Gradients are averaged with one coalesced all_reduce per optimizer step, a dynamic
loss scaler decides on skipped steps from an all-reduced overflow flag, and the
clipping norm is taken after averaging so every rank clips the same way.

    torchrun --nproc-per-node 2 manual_allreduce.py
"""
import argparse
import copy
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors


class LitRegressor(nn.Module):
    """A lightning-ish module: model + step logic + optimizer config in one place."""

    def __init__(self, in_dim=24, hidden=96, lr=1e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.SiLU(), nn.Dropout(0.1),
                                 nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def training_step(self, batch):
        x, y = batch
        return F.smooth_l1_loss(self(x), y)

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        pred = self(x)
        return torch.stack([F.mse_loss(pred, y, reduction="sum"), torch.tensor(float(len(y)))])

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
        return opt, sched


class DynamicLossScaler:
    def __init__(self, init_scale=2.0 ** 12, growth_interval=50):
        self.scale = init_scale
        self.growth_interval = growth_interval
        self.good_steps = 0

    def update(self, overflow):
        if overflow:
            self.scale /= 2.0
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps % self.growth_interval == 0:
                self.scale *= 2.0


class EMA:
    def __init__(self, model, decay=0.995):
        self.shadow = copy.deepcopy(model).eval()
        self.decay = decay
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.lerp_(p, 1 - self.decay)


def sync_params(model):
    for t in list(model.parameters()) + list(model.buffers()):
        dist.broadcast(t.data, src=0)


def allreduce_grads(params, world_size, loss_scale):
    grads = [p.grad for p in params]
    flat = _flatten_dense_tensors(grads)
    dist.all_reduce(flat)
    flat /= (world_size * loss_scale)
    for g, synced in zip(grads, _unflatten_dense_tensors(flat, grads)):
        g.copy_(synced)
    overflow = torch.tensor([0.0 if torch.isfinite(flat).all() else 1.0])
    dist.all_reduce(overflow, op=dist.ReduceOp.MAX)
    return bool(overflow.item())


def make_data(n, in_dim, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, in_dim, generator=g)
    w = torch.randn(in_dim, generator=g)
    y = torch.sin(x @ w / 3) + 0.05 * torch.randn(n, generator=g)
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--accum-steps", type=int, default=4)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    x, y = make_data(8192, 24, seed=7)
    n_train = 7168
    idx = torch.arange(n_train)[rank::world]            # equal-size strided shards
    vidx = torch.arange(n_train, len(x))[rank::world]
    steps_per_epoch = len(idx) // (args.batch_size * args.accum_steps)

    module = LitRegressor()
    sync_params(module)
    opt, sched = module.configure_optimizers(args.epochs * steps_per_epoch)
    scaler = DynamicLossScaler()
    ema = EMA(module)
    params = [p for p in module.parameters() if p.requires_grad]

    t0 = time.time()
    for epoch in range(args.epochs):
        module.train()
        g = torch.Generator().manual_seed(1000 * epoch + rank)
        perm = idx[torch.randperm(len(idx), generator=g)]
        skipped = 0
        for step in range(steps_per_epoch):
            for micro in range(args.accum_steps):
                start = (step * args.accum_steps + micro) * args.batch_size
                b = perm[start:start + args.batch_size]
                loss = module.training_step((x[b], y[b])) / args.accum_steps
                (loss * scaler.scale).backward()
            overflow = allreduce_grads(params, world, scaler.scale)
            scaler.update(overflow)
            if overflow:
                skipped += 1
                opt.zero_grad(set_to_none=False)
                continue
            torch.nn.utils.clip_grad_norm_(params, args.max_grad_norm)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=False)
            ema.update(module)

        module.eval()
        stats = torch.zeros(2)
        for i in range(0, len(vidx), 256):
            b = vidx[i:i + 256]
            stats += ema.shadow.validation_step((x[b], y[b]))
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: last loss {loss.item() * args.accum_steps:.4f} "
                  f"ema val mse {(stats[0] / stats[1]).item():.4f} scale {scaler.scale:.0f} "
                  f"skipped {skipped} ({time.time() - t0:.1f}s)", flush=True)

    # cheap consistency check that hand-synced replicas did not drift apart
    checksum = torch.stack([p.detach().double().sum() for p in module.parameters()]).sum()
    both = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(both, checksum.view(1))
    if rank == 0:
        print("parameter checksums per rank:", [round(t.item(), 6) for t in both], flush=True)
        os.makedirs("checkpoints", exist_ok=True)
        torch.save({"model": module.state_dict(), "ema": ema.shadow.state_dict()},
                   "checkpoints/regressor.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
