"""LightningModule-style autoencoder+classifier with a hand-written DDP loop.

Gradient accumulation (no_sync on the inner micro-steps), EMA weights for
evaluation, cosine schedule with warmup. torchrun --nproc-per-node 2 lit_ema.py
"""
import argparse
import contextlib
import copy
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))


class LitDigits(nn.Module):
    """Mimics the LightningModule API: training_step / validation_step / configure_optimizers."""

    def __init__(self, in_dim=64, latent=16, n_classes=10, lr=2e-3, recon_weight=0.5):
        super().__init__()
        self.hparams = dict(in_dim=in_dim, latent=latent, n_classes=n_classes, lr=lr,
                            recon_weight=recon_weight)
        self.encoder = nn.Sequential(nn.Linear(in_dim, 128), nn.SiLU(), nn.Linear(128, latent))
        self.decoder = nn.Sequential(nn.Linear(latent, 128), nn.SiLU(), nn.Linear(128, in_dim))
        self.classifier = nn.Linear(latent, n_classes)

    def forward(self, x):
        z = self.encoder(x)
        return self.classifier(z), self.decoder(z)

    def training_step(self, batch, model=None):
        x, y = batch
        logits, recon = (model or self)(x)
        return F.cross_entropy(logits, y) + self.hparams["recon_weight"] * F.mse_loss(recon, x)

    @torch.no_grad()
    def validation_step(self, batch, model=None):
        x, y = batch
        logits, recon = (model or self)(x)
        return {
            "correct": (logits.argmax(-1) == y).sum().float(),
            "recon_sse": F.mse_loss(recon, x, reduction="sum"),
            "n": torch.tensor(float(len(y))),
        }

    def configure_optimizers(self, total_steps, warmup=30):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"], weight_decay=0.01)

        def lr_lambda(step):
            if step < warmup:
                return (step + 1) / warmup
            prog = (step - warmup) / max(1, total_steps - warmup)
            return 0.5 * (1 + math.cos(math.pi * min(1.0, prog)))
        return opt, torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)


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
        for s, b in zip(self.shadow.buffers(), model.buffers()):
            s.copy_(b)


def load_split(path, split):
    blob = torch.load(path)
    return TensorDataset(blob[f"{split}_x"], blob[f"{split}_y"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.path.join(HERE, "data", "digits.pt"))
    ap.add_argument("--max-epochs", type=int, default=3)
    ap.add_argument("--micro-batch", type=int, default=16)
    ap.add_argument("--accumulate-grad-batches", type=int, default=4)
    ap.add_argument("--pg-timeout", type=int, default=10)
    ap.add_argument("--ckpt", default=os.path.join(HERE, "data", "lit_ema_last.pt"))
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    train_ds, val_ds = load_split(args.data, "train"), load_split(args.data, "val")
    sampler = DistributedSampler(train_ds, shuffle=True, drop_last=True)
    # validation: no padding duplicates, ranks may get different counts; we sum
    # counts across ranks so the metric stays exact
    val_idx = list(range(rank, len(val_ds), world))
    val_dl = DataLoader(torch.utils.data.Subset(val_ds, val_idx), batch_size=100)
    train_dl = DataLoader(train_ds, batch_size=args.micro_batch, sampler=sampler, drop_last=True)

    lit = LitDigits(in_dim=train_ds.tensors[0].shape[1])
    model = DDP(lit)
    ema = EMA(lit)
    steps_per_epoch = len(train_dl) // args.accumulate_grad_batches
    opt, sched = lit.configure_optimizers(total_steps=args.max_epochs * steps_per_epoch)

    for epoch in range(args.max_epochs):
        sampler.set_epoch(epoch)
        model.train()
        acc_loss, opt_steps = 0.0, 0
        usable = steps_per_epoch * args.accumulate_grad_batches
        for i, batch in enumerate(train_dl):
            if i >= usable:
                break
            last_micro = (i + 1) % args.accumulate_grad_batches == 0
            ctx = contextlib.nullcontext() if last_micro else model.no_sync()
            with ctx:
                loss = lit.training_step(batch, model=model) / args.accumulate_grad_batches
                loss.backward()
            acc_loss += loss.item()
            if last_micro:
                nn.utils.clip_grad_norm_(model.parameters(), 2.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema.update(lit)
                opt_steps += 1

        totals = {"correct": torch.zeros(()), "recon_sse": torch.zeros(()), "n": torch.zeros(())}
        for batch in val_dl:
            out = lit.validation_step(batch, model=ema.shadow)
            for k in totals:
                totals[k] += out[k]
        packed = torch.stack([totals["correct"], totals["recon_sse"], totals["n"],
                              torch.tensor(acc_loss / max(1, opt_steps))])
        dist.all_reduce(packed)
        if rank == 0:
            c, sse, n, l = packed.tolist()
            print(f"epoch {epoch} train_loss {l / world:.4f} ema_val_acc {c / n:.4f} "
                  f"ema_val_mse {sse / (n * lit.hparams['in_dim']):.4f} lr {sched.get_last_lr()[0]:.2e}",
                  flush=True)

    if rank == 0:
        torch.save({"model": lit.state_dict(), "ema": ema.shadow.state_dict(),
                    "hparams": lit.hparams}, args.ckpt)
        print(f"saved {args.ckpt}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
