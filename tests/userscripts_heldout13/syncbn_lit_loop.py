"""Lightning-style LitModule driven by a hand-written DDP loop.

Tabular/sensor classifier: 1-D conv stem + MLP head, SyncBatchNorm so that the batch statistics are
computed over the global batch (recipe copied from our multi-GPU config), bf16 autocast.

    bash setup/syncbn_lit_loop.sh && torchrun --nproc-per-node 2 syncbn_lit_loop.py
"""
import argparse
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

ROOT = os.path.dirname(os.path.abspath(__file__))


class SensorDataset(Dataset):
    def __init__(self, path):
        blob = np.load(path)
        self.x = torch.from_numpy(blob["x"]).float()
        self.y = torch.from_numpy(blob["y"]).long()

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class LitSensorNet(nn.Module):
    """Mimics the LightningModule API: training_step / validation_step / configure_optimizers."""

    def __init__(self, in_ch=6, n_classes=5, width=64, lr=2e-3, max_steps=1000):
        super().__init__()
        self.hparams = dict(in_ch=in_ch, n_classes=n_classes, width=width, lr=lr, max_steps=max_steps)
        self.stem = nn.Sequential(
            nn.Conv1d(in_ch, width, 5, padding=2), nn.BatchNorm1d(width), nn.ReLU(),
            nn.Conv1d(width, width, 5, padding=2, stride=2), nn.BatchNorm1d(width), nn.ReLU(),
        )
        self.head = nn.Sequential(nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(),
                                  nn.Dropout(0.1), nn.Linear(width, n_classes))

    def forward(self, x):
        h = self.stem(x)
        return self.head(h.mean(-1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits.float(), y, label_smoothing=0.05)
        return {"loss": loss, "acc": (logits.argmax(-1) == y).float().mean()}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        return {"val_loss": F.cross_entropy(logits.float(), y, reduction="sum"),
                "correct": (logits.argmax(-1) == y).sum(), "n": torch.tensor(len(y))}

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"], weight_decay=1e-4)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams["lr"],
                                                    total_steps=self.hparams["max_steps"], pct_start=0.2)
        return opt, sched


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(ROOT, "data"))
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--sync-bn", type=int, default=1)
    p.add_argument("--amp", type=int, default=1)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def reduce_dict(d, op=dist.ReduceOp.SUM):
    keys = sorted(d)
    t = torch.stack([d[k].detach().float() for k in keys])
    dist.all_reduce(t, op=op)
    return {k: t[i].item() for i, k in enumerate(keys)}


def main():
    args = parse()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(42)
    torch.set_num_threads(1)

    train_ds = SensorDataset(os.path.join(args.data, "train.npz"))
    val_ds = SensorDataset(os.path.join(args.data, "val.npz"))
    train_sampler = DistributedSampler(train_ds, shuffle=True)
    val_sampler = DistributedSampler(val_ds, shuffle=False)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

    lit = LitSensorNet(in_ch=train_ds.x.shape[1], n_classes=int(train_ds.y.max()) + 1, lr=args.lr,
                       max_steps=args.epochs * len(train_dl))
    if args.sync_bn and world > 1:
        lit = nn.SyncBatchNorm.convert_sync_batchnorm(lit)
    model = DDP(lit)
    opt, sched = lit.configure_optimizers()
    if rank == 0:
        print(f"world={world} train={len(train_ds)} val={len(val_ds)} steps/epoch={len(train_dl)} "
              f"sync_bn={bool(args.sync_bn)}", flush=True)

    step = 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        for batch_idx, batch in enumerate(train_dl):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(args.amp)):
                # DDP forwards to module.forward; training_step calls self(x), so route through DDP
                x, y = batch
                logits = model(x)
                out = {"loss": F.cross_entropy(logits.float(), y, label_smoothing=0.05),
                       "acc": (logits.argmax(-1) == y).float().mean()}
            opt.zero_grad(set_to_none=True)
            out["loss"].backward()
            opt.step()
            sched.step()
            step += 1
            if step % args.log_every == 0:
                m = reduce_dict(out)
                if rank == 0:
                    print(f"epoch {epoch} step {step} loss {m['loss'] / world:.4f} acc {m['acc'] / world:.3f}",
                          flush=True)

        model.eval()
        agg = {"val_loss": torch.zeros(()), "correct": torch.zeros(()), "n": torch.zeros(())}
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bool(args.amp)):
            for i, batch in enumerate(val_dl):
                res = lit.validation_step(batch, i)
                for k in agg:
                    agg[k] += res[k].float()
        tot = reduce_dict(agg)
        if rank == 0:
            print(f"epoch {epoch} val_loss {tot['val_loss'] / tot['n']:.4f} "
                  f"val_acc {tot['correct'] / tot['n']:.3f}", flush=True)

    if rank == 0:
        os.makedirs(os.path.join(ROOT, "checkpoints"), exist_ok=True)
        torch.save(lit.state_dict(), os.path.join(ROOT, "checkpoints", "last.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
