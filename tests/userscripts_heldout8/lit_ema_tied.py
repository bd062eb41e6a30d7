"""Lightning-style module driven by a hand-written DDP loop.

Character-level autoencoder-ish LM with tied input/output embeddings, a frozen
(pre-trained) positional table, an EMA copy of the weights used for validation,
and a cosine schedule with warmup.

    torchrun --nproc-per-node 2 lit_ema_tied.py
"""
import argparse
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


class CharModel(nn.Module):
    def __init__(self, vocab=64, dim=48, ctx=32):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        # sinusoidal table kept as a frozen parameter (loaded from older checkpoints this way)
        pos = torch.arange(ctx)[:, None] / (10000 ** (torch.arange(0, dim, 2) / dim))
        table = torch.zeros(ctx, dim)
        table[:, 0::2], table[:, 1::2] = torch.sin(pos), torch.cos(pos)
        self.pos = nn.Parameter(table, requires_grad=False)
        self.mix = nn.GRU(dim, dim, batch_first=True)
        self.norm = nn.LayerNorm(dim)
        self.out = nn.Linear(dim, vocab, bias=False)
        self.out.weight = self.embed.weight  # weight tying
        self.register_buffer("token_counts", torch.zeros(vocab))

    def forward(self, x):
        if self.training:
            self.token_counts += torch.bincount(x.flatten(), minlength=self.token_counts.numel())
        h = self.embed(x) + self.pos[: x.size(1)]
        h, _ = self.mix(h)
        return self.out(self.norm(h))


class LitCharLM:
    """Minimal LightningModule look-alike: the loop below calls these hooks."""

    def __init__(self, hparams):
        self.hparams = hparams
        self.model = CharModel()

    def training_step(self, model, batch):
        x, y = batch
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))

    @torch.no_grad()
    def validation_step(self, model, batch):
        x, y = batch
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="sum")
        return torch.stack([loss, torch.tensor(float(y.numel()))])

    def configure_optimizers(self, params, total_steps):
        opt = torch.optim.AdamW(params, lr=self.hparams.lr, weight_decay=0.05)
        warm = self.hparams.warmup

        def lr_lambda(step):
            if step < warm:
                return (step + 1) / warm
            return 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total_steps - warm)))

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
            s.lerp_(p.detach(), 1 - self.decay)
        for s, b in zip(self.shadow.buffers(), model.buffers()):
            s.copy_(b)


def synthetic_text(n, ctx, vocab, seed):
    g = torch.Generator().manual_seed(seed)
    seq = torch.zeros(n, ctx + 1, dtype=torch.long)
    seq[:, 0] = torch.randint(0, vocab, (n,), generator=g)
    step = torch.randint(1, 4, (n, 1), generator=g)
    seq[:, 1:] = (seq[:, :1] + step * torch.arange(1, ctx + 1)) % vocab
    return TensorDataset(seq[:, :-1], seq[:, 1:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--ema-decay", type=float, default=0.98)
    ap.add_argument("--pg-timeout", type=int, default=10)
    hp = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=hp.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)

    lit = LitCharLM(hp)
    ddp = DDP(lit.model)
    ema = EMA(lit.model, hp.ema_decay)

    train_ds, val_ds = synthetic_text(1536, 32, 64, 1), synthetic_text(300, 32, 64, 2)
    train_sampler = DistributedSampler(train_ds, shuffle=True, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=hp.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=64, sampler=DistributedSampler(val_ds, shuffle=False))
    total = hp.epochs * len(train_dl)
    opt, sched = lit.configure_optimizers([p for p in ddp.parameters() if p.requires_grad], total)

    for epoch in range(hp.epochs):
        train_sampler.set_epoch(epoch)
        ddp.train()
        run = torch.zeros(2)
        for i, batch in enumerate(train_dl):
            loss = lit.training_step(ddp, batch)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            ema.update(lit.model)
            run += torch.stack([loss.detach(), torch.tensor(1.0)])
        dist.all_reduce(run)

        # validation with the EMA weights; every rank evaluates its slice
        agg = torch.zeros(2)
        for batch in val_dl:
            agg += lit.validation_step(ema.shadow, batch)
        dist.all_reduce(agg)
        if rank == 0:
            seen = int(lit.model.token_counts.sum())
            print(f"epoch {epoch}: train {run[0] / run[1]:.4f} val(ema) {agg[0] / agg[1]:.4f} "
                  f"lr {sched.get_last_lr()[0]:.2e} tokens(rank0) {seen}", flush=True)

    if rank == 0:
        ckpt = os.path.join(os.path.dirname(os.path.abspath(__file__)), "char_ema.pt")
        torch.save({"model": lit.model.state_dict(), "ema": ema.shadow.state_dict()}, ckpt)
        print("saved", ckpt, flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
