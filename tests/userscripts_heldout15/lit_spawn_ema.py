"""Lightning-style module driven by a hand-written DDP loop.

DataLoader workers use the "spawn" start method (the dataset and collate live
at module level so they pickle), logs go to one file per rank under
runs/$RUN_NAME, weights are tracked with an EMA copy, gradients are accumulated
with no_sync.  torchrun --nproc-per-node 2 lit_spawn_ema.py
"""
import argparse
import copy
import logging
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


class SpiralDataset(Dataset):
    """Two interleaved noisy spirals, generated deterministically from a seed."""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        t = torch.rand(n, generator=g) * 3 * torch.pi
        self.y = torch.randint(0, 2, (n,), generator=g)
        r = t / (3 * torch.pi)
        ang = t + self.y * torch.pi
        self.x = torch.stack([r * torch.cos(ang), r * torch.sin(ang)], 1)
        self.x += 0.03 * torch.randn(self.x.shape, generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class LitSpiral(nn.Module):
    def __init__(self, hidden=64, lr=5e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(2, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                 nn.SiLU(), nn.Linear(hidden, 2))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch):
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_step(self, batch):
        x, y = batch
        logits = self(x)
        return torch.stack([F.cross_entropy(logits, y, reduction="sum"),
                            (logits.argmax(1) == y).sum().float(), torch.tensor(float(len(y)))])

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total_steps)
        return opt, sched


class EMA:
    def __init__(self, module, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(module).eval().requires_grad_(False)

    @torch.no_grad()
    def update(self, module):
        for s, p in zip(self.shadow.parameters(), module.parameters()):
            s.lerp_(p, 1 - self.decay)


def setup_logging(run_dir, rank):
    os.makedirs(run_dir, exist_ok=True)
    logger = logging.getLogger("spiral")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    fh = logging.FileHandler(os.path.join(run_dir, f"rank{rank}.log"), mode="w")
    fh.setFormatter(logging.Formatter(f"%(asctime)s [rank{rank}] %(message)s"))
    logger.addHandler(fh)
    if rank == 0:
        logger.addHandler(logging.StreamHandler())
    return logger


def validate(lit, loader):
    lit.eval()
    tot = torch.zeros(3)
    with torch.no_grad():
        for batch in loader:
            tot += lit.validation_step(batch)
    dist.all_reduce(tot)
    lit.train()
    return (tot[0] / tot[2]).item(), (tot[1] / tot[2]).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--num-workers", type=int, default=1)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    run_name = os.environ.get("RUN_NAME", "spiral-default")
    run_dir = os.path.join(HERE, "runs", run_name)
    log = setup_logging(run_dir, rank)
    torch.manual_seed(0)

    train_ds, val_ds = SpiralDataset(4096, seed=1), SpiralDataset(1000, seed=2)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=0, drop_last=True)
    dl_kw = dict(num_workers=args.num_workers, multiprocessing_context="spawn", persistent_workers=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True, **dl_kw)
    val_dl = DataLoader(val_ds, batch_size=250, sampler=DistributedSampler(val_ds, shuffle=False), **dl_kw)

    lit = LitSpiral()
    model = DDP(lit)
    ema = EMA(lit)
    steps_per_epoch = len(train_dl) // args.accum
    opt, sched = lit.configure_optimizers(args.epochs * steps_per_epoch)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        it = iter(train_dl)
        for step in range(steps_per_epoch):
            for micro in range(args.accum):
                batch = next(it)
                x, y = batch
                if micro < args.accum - 1:
                    with model.no_sync():  # skip the all-reduce on all but the last micro-batch
                        (F.cross_entropy(model(x), y) / args.accum).backward()
                else:
                    (F.cross_entropy(model(x), y) / args.accum).backward()
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            ema.update(lit)
        for _ in it:  # drain the leftover micro-batches so persistent workers start clean
            pass
        vloss, vacc = validate(lit, val_dl)
        eloss, eacc = validate(ema.shadow, val_dl)
        log.info("epoch %d val_loss %.4f val_acc %.3f | ema val_loss %.4f ema_acc %.3f",
                 epoch, vloss, vacc, eloss, eacc)

    if rank == 0:
        torch.save({"model": lit.state_dict(), "ema": ema.shadow.state_dict()},
                   os.path.join(run_dir, "final.pt"))
    dist.barrier()
    log.info("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
