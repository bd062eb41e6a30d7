"""Lightning-style module driven by a hand-written loop.

torchrun --nproc-per-node 2 ema_module_loop.py
- gradient traffic on the default group, pickled objects on a separate gloo group
- EMA weights, cosine schedule, SIGTERM -> graceful stop agreed by all ranks
"""
import argparse
import copy
import os
import signal
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

STOP_REQUESTED = False


def _on_sigterm(signum, frame):
    global STOP_REQUESTED
    STOP_REQUESTED = True
    print(f"[pid {os.getpid()}] got signal {signum}, will stop at the next step boundary", flush=True)


class LitRegressor(nn.Module):
    def __init__(self, d_in=16, hidden=64, lr=2e-3):
        super().__init__()
        self.hparams = dict(d_in=d_in, hidden=hidden, lr=lr)
        self.body = nn.Sequential(nn.Linear(d_in, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh())
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        return self.head(self.body(x)).squeeze(-1)

    def training_step(self, batch, model=None):
        x, y = batch
        pred = (model or self)(x)
        return F.mse_loss(pred, y)

    @torch.no_grad()
    def validation_step(self, batch, model=None):
        x, y = batch
        pred = (model or self)(x)
        return F.mse_loss(pred, y, reduction="sum"), len(y)

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"])
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, total_steps))
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


def make_data(n, d, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    w = torch.randn(d, generator=g)
    y = torch.sin(x @ w) + 0.05 * torch.randn(n, generator=g)
    return TensorDataset(x, y)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--obj-timeout", type=int, default=60, help="seconds, object group")
    p.add_argument("--ckpt", default="ckpt/ema_last.pt")
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    obj_group = dist.new_group(backend="gloo", timeout=timedelta(seconds=args.obj_timeout))
    signal.signal(signal.SIGTERM, _on_sigterm)
    torch.manual_seed(0)

    module = LitRegressor()
    ddp = DDP(module)
    ema = EMA(module)
    train_ds, val_ds = make_data(3000, 16, 1), make_data(500, 16, 2)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=128, sampler=DistributedSampler(val_ds, shuffle=False))
    opt, sched = module.configure_optimizers(args.epochs * len(train_dl))

    start_epoch = 0
    if os.path.exists(args.ckpt):
        state = torch.load(args.ckpt, map_location="cpu")
        module.load_state_dict(state["model"])
        ema.shadow.load_state_dict(state["ema"])
        opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"])
        start_epoch = state["epoch"] + 1
        if rank == 0:
            print(f"resumed from {args.ckpt} at epoch {start_epoch}", flush=True)

    stop = False
    for epoch in range(start_epoch, args.epochs):
        train_sampler.set_epoch(epoch)
        t0 = time.time()
        ddp.train()
        for step, batch in enumerate(train_dl):
            loss = module.training_step(batch, model=ddp)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            ema.update(module)
            # every rank takes part in the stop vote, so they all leave on the same step
            flag = torch.tensor([1.0 if STOP_REQUESTED else 0.0])
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if flag.item() > 0:
                stop = True
                break

        sums = torch.zeros(4)
        for batch in val_dl:
            l_raw, n = module.validation_step(batch)
            l_ema, _ = module.validation_step(batch, model=ema.shadow)
            sums += torch.tensor([l_raw.item(), l_ema.item(), n, 0.0])
        sums[3] = time.time() - t0
        per_rank = [None] * world
        dist.all_gather_object(per_rank, {"rank": rank, "val_n": int(sums[2]), "secs": round(float(sums[3]), 2)},
                               group=obj_group)
        dist.all_reduce(sums[:3])
        if rank == 0:
            print(f"epoch {epoch}: val_mse={sums[0] / sums[2]:.4f} ema_mse={sums[1] / sums[2]:.4f} "
                  f"lr={sched.get_last_lr()[0]:.2e} ranks={per_rank}", flush=True)
            os.makedirs(os.path.dirname(args.ckpt), exist_ok=True)
            tmp = args.ckpt + ".tmp"
            torch.save({"model": module.state_dict(), "ema": ema.shadow.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "epoch": epoch}, tmp)
            os.replace(tmp, args.ckpt)
        dist.barrier()
        if stop:
            break

    if rank == 0:
        print("training finished" + (" (stopped early on SIGTERM)" if stop else ""), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
