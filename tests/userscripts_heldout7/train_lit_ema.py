# Small CNN on synthetic 16x16 "glyph" images.
# Lightning-style module (training_step / validation_step / configure_optimizers) driven by a hand loop, with EMA.
#   torchrun --nproc-per-node 2 train_lit_ema.py
import argparse
import copy
import random
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Subset
from torch.utils.data.distributed import DistributedSampler


def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Glyphs(Dataset):
    """10 fixed random prototypes + noise; the same on every rank (own generator)."""

    def __init__(self, n, seed=0, augment=False):
        g = torch.Generator().manual_seed(seed)
        protos = (torch.rand(10, 1, 16, 16, generator=g) > 0.6).float()
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.x = protos[self.y] + 0.3 * torch.randn(n, 1, 16, 16, generator=g)
        self.augment = augment

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        x = self.x[i]
        if self.augment:
            if torch.rand(1).item() < 0.5:
                x = x.flip(-1)
            x = x + 0.1 * torch.randn_like(x)
        return x, self.y[i]


class LitGlyphNet(nn.Module):
    def __init__(self, lr=2e-3, width=32):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.GroupNorm(8, width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1, stride=2), nn.GroupNorm(8, width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, 10))

    def forward(self, x):
        return self.net(x)

    def training_step(self, model, batch):
        x, y = batch
        return F.cross_entropy(model(x), y)

    @torch.no_grad()
    def validation_step(self, model, batch):
        x, y = batch
        logits = model(x)
        return torch.stack([F.cross_entropy(logits, y, reduction="sum"),
                            (logits.argmax(1) == y).sum().float(), torch.tensor(float(len(y)))])

    def configure_optimizers(self, params):
        opt = torch.optim.AdamW(params, lr=self.lr, weight_decay=0.05)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
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


def fit(lit, train_loader, val_loader, sampler, epochs, rank):
    model = DDP(lit)
    opt, sched = lit.configure_optimizers(model.parameters())
    ema = EMA(lit)
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        model.train()
        for step, batch in enumerate(train_loader):
            loss = lit.training_step(model, batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            ema.update(lit)
            if rank == 0 and step % 10 == 0:
                print(f"epoch {epoch} step {step}/{len(train_loader)} loss {loss.item():.4f}", flush=True)
        sched.step()

        # validate the EMA weights on this rank's share of the val set, then sum across ranks
        stats = torch.zeros(3)
        for batch in val_loader:
            stats += lit.validation_step(ema.shadow, batch)
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch} ema val loss {stats[0] / stats[2]:.4f} acc {stats[1] / stats[2]:.3f}", flush=True)
    return ema


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--n-train", type=int, default=3000)
    ap.add_argument("--subsample", type=float, default=0.6, help="fraction of train set used (quick runs)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    # different seed per rank so each rank draws different augmentation noise
    seed_everything(args.seed + rank)

    full = Glyphs(args.n_train, seed=0, augment=True)
    keep = torch.nonzero(torch.rand(len(full)) < args.subsample).flatten().tolist()
    train_ds = Subset(full, keep)
    val_ds = Glyphs(512, seed=1)

    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)
    val_loader = DataLoader(val_ds, batch_size=128, sampler=DistributedSampler(val_ds, shuffle=False))
    print(f"[rank {rank}] train subset {len(train_ds)}/{len(full)}, {len(train_loader)} batches", flush=True)

    torch.manual_seed(args.seed)  # same init on every rank
    lit = LitGlyphNet()
    fit(lit, train_loader, val_loader, sampler, args.epochs, rank)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
