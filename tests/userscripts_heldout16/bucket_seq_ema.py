"""Sequence classifier, Lightning-style module driven by a small hand-written loop.

Length-bucketed batches are built from ONE global shuffle (same generator seed on
every rank, re-seeded by set_epoch), then dealt out so every rank gets the same
number of batches. Gradient accumulation with no_sync, EMA weights for eval.

    torchrun --nproc-per-node 2 bucket_seq_ema.py
"""
import argparse
import contextlib
import copy
import math
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, Sampler


@dataclass
class HParams:
    n_train: int = 1500
    n_val: int = 200
    vocab: int = 200
    dim: int = 48
    n_classes: int = 4
    batch_size: int = 24
    accum: int = 2
    epochs: int = 3
    lr: float = 2e-3
    ema_decay: float = 0.99
    seed: int = 1


class RandomSeqDataset(Dataset):
    """Synthetic: label = which quarter of the vocabulary the most frequent token falls in."""

    def __init__(self, n, vocab, n_classes, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            L = int(torch.randint(5, 60, (1,), generator=g))
            label = int(torch.randint(0, n_classes, (1,), generator=g))
            lo = label * vocab // n_classes
            seq = torch.randint(1, vocab, (L,), generator=g)
            k = max(1, L // 3)
            seq[:k] = torch.randint(max(lo, 1), lo + vocab // n_classes, (k,), generator=g)
            seq = seq[torch.randperm(L, generator=g)]
            self.items.append((seq, label))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class DistributedBucketBatchSampler(Sampler):
    def __init__(self, lengths, batch_size, rank, world_size, seed=0, bucket_mult=50):
        self.lengths, self.bs = lengths, batch_size
        self.rank, self.world = rank, world_size
        self.seed, self.epoch, self.bucket_mult = seed, 0, bucket_mult

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _all_batches(self):
        g = torch.Generator().manual_seed(self.seed + self.epoch)   # identical on every rank
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        chunk = self.bs * self.bucket_mult
        batches = []
        for s in range(0, len(order), chunk):
            bucket = sorted(order[s:s + chunk], key=lambda i: self.lengths[i])
            batches += [bucket[j:j + self.bs] for j in range(0, len(bucket), self.bs)]
        perm = torch.randperm(len(batches), generator=g).tolist()
        batches = [batches[p] for p in perm]
        usable = len(batches) - len(batches) % self.world            # same count on every rank
        return batches[:usable]

    def __iter__(self):
        return iter(self._all_batches()[self.rank::self.world])

    def __len__(self):
        return len(self._all_batches()) // self.world


def pad_collate(batch):
    seqs, labels = zip(*batch)
    lens = torch.tensor([len(s) for s in seqs])
    x = nn.utils.rnn.pad_sequence(list(seqs), batch_first=True, padding_value=0)
    return x, lens, torch.tensor(labels)


class LitSeqClassifier(nn.Module):
    def __init__(self, hp: HParams):
        super().__init__()
        self.hp = hp
        self.emb = nn.Embedding(hp.vocab, hp.dim, padding_idx=0)
        self.enc = nn.Sequential(nn.Linear(hp.dim, hp.dim), nn.GELU(), nn.Linear(hp.dim, hp.dim))
        self.cls = nn.Linear(hp.dim, hp.n_classes)

    def forward(self, x, lens):
        h = self.enc(self.emb(x))
        mask = (x != 0).unsqueeze(-1).float()
        pooled = (h * mask).sum(1) / lens.clamp(min=1).unsqueeze(-1).float()
        return self.cls(pooled)

    def training_step(self, batch, model=None):
        x, lens, y = batch
        logits = (model or self)(x, lens)
        return F.cross_entropy(logits, y)

    @torch.no_grad()
    def validation_step(self, batch):
        x, lens, y = batch
        logits = self(x, lens)
        return torch.tensor([F.cross_entropy(logits, y, reduction="sum").item(),
                             (logits.argmax(1) == y).sum().item(), len(y)], dtype=torch.float64)

    def configure_optimizers(self, steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hp.lr)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hp.lr, total_steps=steps)
        return opt, sched


@torch.no_grad()
def ema_update(ema, model, decay):
    for pe, pm in zip(ema.parameters(), model.parameters()):
        pe.mul_(decay).add_(pm.detach(), alpha=1 - decay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg-timeout", type=int, default=10)
    ap.add_argument("--epochs", type=int, default=HParams.epochs)
    cli = ap.parse_args()
    hp = HParams(epochs=cli.epochs)

    dist.init_process_group("gloo", timeout=timedelta(seconds=cli.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(hp.seed)

    train_ds = RandomSeqDataset(hp.n_train, hp.vocab, hp.n_classes, seed=hp.seed)
    val_ds = RandomSeqDataset(hp.n_val, hp.vocab, hp.n_classes, seed=hp.seed + 99)
    sampler = DistributedBucketBatchSampler([len(s) for s, _ in train_ds.items], hp.batch_size,
                                            rank, world, seed=hp.seed)
    train_dl = DataLoader(train_ds, batch_sampler=sampler, collate_fn=pad_collate)
    val_idx = list(range(rank, len(val_ds), world))
    val_dl = DataLoader(torch.utils.data.Subset(val_ds, val_idx), batch_size=64, collate_fn=pad_collate)

    lit = LitSeqClassifier(hp)
    ema = copy.deepcopy(lit).requires_grad_(False)
    ddp = DDP(lit)
    opt_steps = hp.epochs * math.ceil(len(sampler) / hp.accum)
    opt, sched = lit.configure_optimizers(opt_steps)

    for epoch in range(hp.epochs):
        sampler.set_epoch(epoch)
        lit.train()
        n_batches = len(train_dl)
        for i, batch in enumerate(train_dl):
            last_micro = (i + 1) % hp.accum == 0 or (i + 1) == n_batches
            ctx = contextlib.nullcontext() if last_micro else ddp.no_sync()
            with ctx:
                loss = lit.training_step(batch, model=ddp) / hp.accum
                loss.backward()
            if last_micro:
                torch.nn.utils.clip_grad_norm_(lit.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema_update(ema, lit, hp.ema_decay)

        ema.eval()
        stats = torch.zeros(3, dtype=torch.float64)
        for batch in val_dl:
            stats += ema.validation_step(batch)
        dist.all_reduce(stats)
        if rank == 0:
            print(f"epoch {epoch}: batches/rank {n_batches} ema val loss {stats[0] / stats[2]:.4f} "
                  f"acc {stats[1] / stats[2]:.3f}", flush=True)

    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
