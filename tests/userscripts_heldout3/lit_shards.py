"""Lightning-style module + a small hand-written fit loop (we dropped the lightning dependency).

Data lives in pre-sharded files (data/shards/{train,val}-NNNNN.pt, written by setup/lit_shards.sh);
like with webdataset, every rank streams only its own shards: files[rank::world_size].

    torchrun --nproc-per-node 2 lit_shards.py --max-epochs 3
"""
import argparse
import csv
import glob
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

HERE = os.path.dirname(os.path.abspath(__file__))


class ShardStream(IterableDataset):
    def __init__(self, files, shuffle=False, seed=0):
        self.files, self.shuffle, self.seed, self.epoch = list(files), shuffle, seed, 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.files), generator=g).tolist() if self.shuffle else range(len(self.files))
        for i in order:
            shard = torch.load(self.files[i])
            idx = torch.randperm(len(shard["y"]), generator=g) if self.shuffle else range(len(shard["y"]))
            for j in idx:
                yield shard["x"][j], shard["y"][j]


class LitClassifier(nn.Module):
    def __init__(self, d_in=32, d_hidden=96, n_classes=8, lr=1e-3, warmup_steps=50, total_steps=1000):
        super().__init__()
        self.hparams = dict(d_in=d_in, d_hidden=d_hidden, n_classes=n_classes, lr=lr,
                            warmup_steps=warmup_steps, total_steps=total_steps)
        self.backbone = nn.Sequential(nn.Linear(d_in, d_hidden), nn.SiLU(),
                                      nn.Linear(d_hidden, d_hidden), nn.LayerNorm(d_hidden), nn.SiLU())
        self.head = nn.Linear(d_hidden, n_classes)
        self.logged = {}

    def forward(self, x):
        return self.head(self.backbone(x))

    def log(self, name, value):
        self.logged[name] = float(value)

    # --- hooks -------------------------------------------------------------------------------
    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss.item())
        return loss

    def on_validation_epoch_start(self):
        self._val = {"loss_sum": 0, "correct": 0, "count": 0}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self._val["loss_sum"] += F.cross_entropy(logits, y, reduction="sum").item()
        self._val["correct"] += (logits.argmax(-1) == y).sum().item()
        self._val["count"] += y.numel()

    def on_validation_epoch_end(self):
        v = self._val
        totals = torch.tensor([v["loss_sum"], v["correct"], v["count"]])
        dist.all_reduce(totals)                      # sync_dist=True
        self.log("val_loss", totals[0] / totals[2])
        self.log("val_acc", totals[1] / totals[2])

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"], weight_decay=0.05)
        w, t = self.hparams["warmup_steps"], self.hparams["total_steps"]
        lam = lambda s: (s + 1) / w if s < w else 0.5 * (1 + math.cos(math.pi * min(1.0, (s - w) / max(1, t - w))))
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lam)


class _StepRouter(nn.Module):
    """What Lightning does under the hood: DDP wraps this and forward() calls training_step."""

    def __init__(self, lit):
        super().__init__()
        self.lit = lit

    def forward(self, batch, batch_idx):
        return self.lit.training_step(batch, batch_idx)


def run_validation(lit, loader, limit=None):
    lit.eval()
    lit.on_validation_epoch_start()
    with torch.no_grad():
        for i, batch in enumerate(loader):
            if limit is not None and i >= limit:
                break
            lit.validation_step(batch, i)
    lit.on_validation_epoch_end()
    lit.train()


def fit(lit, train_ds, train_dl, val_dl, args, rank):
    ddp = DDP(_StepRouter(lit))
    opt, sched = lit.configure_optimizers()
    if args.num_sanity_val_steps > 0:
        run_validation(lit, val_dl, limit=args.num_sanity_val_steps)
        if rank == 0:
            print(f"sanity check: val_loss {lit.logged['val_loss']:.3f} (untrained)", flush=True)
    logger = csv.writer(open(os.path.join(args.out, "metrics.csv"), "w", newline="")) if rank == 0 else None
    best, step, t0 = -1.0, 0, time.time()
    for epoch in range(args.max_epochs):
        train_ds.set_epoch(epoch)
        for batch_idx, batch in enumerate(train_dl):
            loss = ddp(batch, batch_idx)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(lit.parameters(), args.gradient_clip_val)
            opt.step()
            sched.step()
            step += 1
            if rank == 0 and step % args.log_every_n_steps == 0:
                print(f"epoch {epoch} step {step} train_loss {lit.logged['train_loss']:.4f} "
                      f"lr {sched.get_last_lr()[0]:.2e}", flush=True)
        run_validation(lit, val_dl)
        if rank == 0:
            m = lit.logged
            print(f"epoch {epoch} val_loss {m['val_loss']:.4f} val_acc {m['val_acc']:.4f} "
                  f"({time.time() - t0:.1f}s)", flush=True)
            logger.writerow([epoch, step, m["train_loss"], m["val_loss"], m["val_acc"]])
            if m["val_acc"] > best:
                best = m["val_acc"]
                torch.save({"state_dict": lit.state_dict(), "hparams": lit.hparams, "epoch": epoch},
                           os.path.join(args.out, "best.ckpt"))
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(HERE, "data", "shards"))
    p.add_argument("--out", default=os.path.join(HERE, "runs", "lit_shards"))
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--max-epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--num-sanity-val-steps", type=int, default=2)
    p.add_argument("--gradient-clip-val", type=float, default=1.0)
    p.add_argument("--log-every-n-steps", type=int, default=20)
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    os.makedirs(args.out, exist_ok=True)

    train_files = sorted(glob.glob(os.path.join(args.data, "train-*.pt")))
    val_files = sorted(glob.glob(os.path.join(args.data, "val-*.pt")))
    train_ds = ShardStream(train_files[rank::world], shuffle=True, seed=17)
    val_ds = ShardStream(val_files[rank::world])
    train_dl = DataLoader(train_ds, batch_size=args.batch_size)
    val_dl = DataLoader(val_ds, batch_size=256)

    per_rank = sum(len(torch.load(f)["y"]) for f in train_files[rank::world])
    total_steps = args.max_epochs * math.ceil(per_rank / args.batch_size)
    lit = LitClassifier(lr=args.lr, total_steps=total_steps)
    if rank == 0:
        print(f"world {world}: {len(train_files)} train / {len(val_files)} val shards, "
              f"{per_rank} train samples per rank, {total_steps} steps", flush=True)
    best = fit(lit, train_ds, train_dl, val_dl, args, rank)
    if rank == 0:
        print(f"done, best val_acc {best:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
