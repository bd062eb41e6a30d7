"""Lightning-style module driven by a hand-written loop: grad accumulation, EMA weights,
a wall-clock budget and resumable checkpoints.

    torchrun --nproc-per-node 2 lit_ema_timelimit.py --max-minutes 0.2
"""
import argparse
import contextlib
import copy
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


class LitClassifier(nn.Module):
    def __init__(self, d_in=32, hidden=96, n_cls=5, lr=2e-3):
        super().__init__()
        self.hparams = dict(d_in=d_in, hidden=hidden, n_cls=n_cls, lr=lr)
        self.backbone = nn.Sequential(nn.Linear(d_in, hidden), nn.SiLU(), nn.Linear(hidden, hidden), nn.SiLU())
        self.head = nn.Linear(hidden, n_cls)

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch):
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y, reduction="sum"), (logits.argmax(1) == y).sum(), len(y)

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"])
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, total_steps))
        return opt, sched


class EMA:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def build_dataset(path, rank):
    """rank 0 generates and caches the data, the others wait and read the same file."""
    if rank == 0 and not os.path.exists(path):
        g = torch.Generator().manual_seed(7)
        centers = torch.randn(5, 32, generator=g) * 2
        y = torch.randint(0, 5, (8000,), generator=g)
        x = centers[y] + torch.randn(8000, 32, generator=g)
        tmp = path + ".tmp"
        torch.save({"x": x, "y": y}, tmp)
        os.replace(tmp, path)
    dist.barrier()
    d = torch.load(path)
    n_val = 1000
    return TensorDataset(d["x"][n_val:], d["y"][n_val:]), TensorDataset(d["x"][:n_val], d["y"][:n_val])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--accumulate", type=int, default=2)
    ap.add_argument("--max-minutes", type=float, default=0.2)
    ap.add_argument("--ckpt", default="checkpoints/last.pt")
    ap.add_argument("--data-cache", default="data_cache.pt")
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    torch.manual_seed(0)
    t_start = time.time()

    train_ds, val_ds = build_dataset(args.data_cache, rank)
    sampler = DistributedSampler(train_ds, shuffle=True, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=250, sampler=DistributedSampler(val_ds, shuffle=False))

    module = LitClassifier()
    total_steps = args.epochs * len(train_dl) // args.accumulate
    opt, sched = module.configure_optimizers(total_steps)
    start_epoch = 0
    if os.path.exists(args.ckpt):  # every rank resumes from the same file
        ck = torch.load(args.ckpt)
        module.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        sched.load_state_dict(ck["sched"])
        start_epoch = ck["epoch"] + 1
        if rank == 0:
            print(f"resumed from {args.ckpt} at epoch {start_epoch}", flush=True)
    model = DDP(module)
    ema = EMA(module)

    def save(epoch):
        if rank == 0:
            os.makedirs(os.path.dirname(args.ckpt), exist_ok=True)
            torch.save({"model": module.state_dict(), "ema": ema.shadow.state_dict(),
                        "opt": opt.state_dict(), "sched": sched.state_dict(), "epoch": epoch},
                       args.ckpt + ".tmp")
            os.replace(args.ckpt + ".tmp", args.ckpt)
        dist.barrier()

    for epoch in range(start_epoch, args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        for i, batch in enumerate(train_dl):
            sync_now = (i + 1) % args.accumulate == 0
            ctx = contextlib.nullcontext() if sync_now else model.no_sync()
            with ctx:
                x, y = batch
                loss = F.cross_entropy(model(x), y)  # through the DDP wrapper so grads get reduced
                (loss / args.accumulate).backward()
            if sync_now:
                opt.step()
                opt.zero_grad(set_to_none=True)
                sched.step()
                ema.update(module)

        stats = torch.zeros(3)
        with torch.no_grad():
            for batch in val_dl:
                l, c, n = ema.shadow.validation_step(batch)
                stats += torch.tensor([float(l), float(c), float(n)])
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f} ema val_loss {stats[0] / stats[2]:.4f} "
                  f"acc {stats[1] / stats[2]:.3f} ({time.time() - t_start:.1f}s)", flush=True)
        save(epoch)

        # wall-clock budget: decide together so that every rank stops after the same epoch
        out_of_time = torch.tensor([float(time.time() - t_start > args.max_minutes * 60)])
        dist.all_reduce(out_of_time, op=dist.ReduceOp.MAX)
        if out_of_time.item() > 0:
            if rank == 0:
                print(f"time budget of {args.max_minutes} min used up after epoch {epoch}; "
                      f"re-run to resume from {args.ckpt}", flush=True)
            break

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
