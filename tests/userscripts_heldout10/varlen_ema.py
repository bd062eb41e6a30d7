"""GRU sequence classifier on variable-length token sequences.

Lightning-style module driven by a small hand-written loop: gradient
accumulation with no_sync, EMA weights for evaluation, warmup+cosine schedule.

    torchrun --nproc-per-node 2 varlen_ema.py
"""
import argparse
import copy
import math
import os
import time
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils.rnn import pack_padded_sequence, pad_sequence
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

VOCAB, N_CLASSES = 50, 4


class ToySeqs(Dataset):
    """label = which of four token groups occurs most often in the sequence"""

    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.items = []
        for _ in range(n):
            length = int(torch.randint(5, 60, (1,), generator=g))
            toks = torch.randint(1, VOCAB, (length,), generator=g)
            groups = torch.bincount((toks - 1) * N_CLASSES // (VOCAB - 1), minlength=N_CLASSES)
            self.items.append((toks, int(groups.argmax())))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    toks, labels = zip(*batch)
    lengths = torch.tensor([len(t) for t in toks])
    return pad_sequence(toks, batch_first=True), lengths, torch.tensor(labels)


class SeqClassifier(nn.Module):
    def __init__(self, hp):
        super().__init__()
        self.hp = hp
        self.emb = nn.Embedding(VOCAB, hp.dim, padding_idx=0)
        self.rnn = nn.GRU(hp.dim, hp.dim, batch_first=True, bidirectional=True)
        self.head = nn.Sequential(nn.LayerNorm(2 * hp.dim), nn.Linear(2 * hp.dim, N_CLASSES))

    def forward(self, toks, lengths):
        packed = pack_padded_sequence(self.emb(toks), lengths, batch_first=True, enforce_sorted=False)
        _, h = self.rnn(packed)
        return self.head(torch.cat([h[0], h[1]], dim=-1))

    def training_step(self, batch, net):
        toks, lengths, y = batch
        return F.cross_entropy(net(toks, lengths), y)

    @torch.no_grad()
    def validation_step(self, batch, net):
        toks, lengths, y = batch
        logits = net(toks, lengths)
        return F.cross_entropy(logits, y, reduction="none"), (logits.argmax(-1) == y).float(), lengths

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hp.lr, weight_decay=0.01)
        warm = max(1, total_steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (total_steps - warm))))
        return opt, sched


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def gather_varlen(t):
    """all_gather a 1-D tensor whose length differs per rank"""
    n = torch.tensor([t.numel()])
    sizes = [torch.zeros_like(n) for _ in range(dist.get_world_size())]
    dist.all_gather(sizes, n)
    max_n = int(max(s.item() for s in sizes))
    buf = torch.zeros(max_n, dtype=t.dtype)
    buf[:t.numel()] = t
    out = [torch.zeros_like(buf) for _ in sizes]
    dist.all_gather(out, buf)
    return torch.cat([o[:int(s)] for o, s in zip(out, sizes)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dim", type=int, default=48)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--bs", type=int, default=32)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--ema-decay", type=float, default=0.99)
    p.add_argument("--long-threshold", type=int, default=40)
    p.add_argument("--pg-timeout", type=int, default=10)
    hp = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=hp.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    train_ds, val_ds = ToySeqs(1600, seed=1), ToySeqs(300, seed=2)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
    train_dl = DataLoader(train_ds, batch_size=hp.bs, sampler=train_sampler, collate_fn=collate)
    val_dl = DataLoader(val_ds, batch_size=64, sampler=DistributedSampler(val_ds, shuffle=False),
                        collate_fn=collate)

    module = SeqClassifier(hp)
    net = DDP(module)
    steps_per_epoch = math.ceil(len(train_dl) / hp.accum)
    opt, sched = module.configure_optimizers(steps_per_epoch * hp.epochs)
    ema = EMA(module, hp.ema_decay)

    for epoch in range(hp.epochs):
        train_sampler.set_epoch(epoch)
        net.train()
        t0, tot, n = time.time(), 0.0, 0
        for i, batch in enumerate(train_dl):
            last_micro = (i + 1) % hp.accum == 0 or i + 1 == len(train_dl)
            with (nullcontext() if last_micro else net.no_sync()):
                loss = module.training_step(batch, net) / hp.accum
                loss.backward()
            tot += loss.item() * hp.accum
            n += 1
            if last_micro:
                torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
                ema.update(module)

        # ---- validation with the EMA weights, every rank on its own split
        losses, accs, lens = [], [], []
        for batch in val_dl:
            l, a, ln = module.validation_step(batch, ema.shadow)
            losses.append(l), accs.append(a), lens.append(ln)
        losses, accs, lens = torch.cat(losses), torch.cat(accs), torch.cat(lens)
        long_acc = gather_varlen(accs[lens >= hp.long_threshold])   # differs in size per rank
        all_loss = gather_varlen(losses)
        all_acc = gather_varlen(accs)
        train_stats = torch.tensor([tot, n], dtype=torch.float64)
        dist.all_reduce(train_stats)
        if rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] epoch {epoch} train {train_stats[0] / train_stats[1]:.4f} "
                  f"val_loss {all_loss.mean():.4f} val_acc {all_acc.mean():.3f} "
                  f"long_acc {long_acc.mean():.3f} (n={long_acc.numel()}) "
                  f"lr {sched.get_last_lr()[0]:.2e} {time.time() - t0:.1f}s", flush=True)

    if rank == 0:
        os.makedirs("checkpoints", exist_ok=True)
        torch.save({"model": module.state_dict(), "ema": ema.shadow.state_dict()}, "checkpoints/last.pt")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
