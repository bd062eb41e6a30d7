"""Character-level LM continued pre-training with FSDP2 (fully_shard) on CPU/gloo.

LightningModule-style model (training_step / configure_optimizers) driven by a small
hand-written loop.

    bash setup/fsdp_lm.sh
    torchrun --nproc-per-node 2 fsdp_lm.py --init-from data/pretrained.pt
"""
import argparse
import os
import time
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import fully_shard
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class LMConfig:
    vocab: int = 128          # raw bytes < 128
    dim: int = 96
    layers: int = 3
    heads: int = 4
    ctx: int = 64


class CharLM(nn.Module):
    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(cfg.vocab, cfg.dim)
        self.pos = nn.Parameter(torch.zeros(1, cfg.ctx, cfg.dim))
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(cfg.dim, cfg.heads, 4 * cfg.dim, dropout=0.0,
                                       batch_first=True, norm_first=True)
            for _ in range(cfg.layers)])
        self.norm = nn.LayerNorm(cfg.dim)
        self.out = nn.Linear(cfg.dim, cfg.vocab)

    def forward(self, x):
        T = x.shape[1]
        h = self.emb(x) + self.pos[:, :T]
        mask = nn.Transformer.generate_square_subsequent_mask(T)
        for layer in self.layers:
            h = layer(h, src_mask=mask, is_causal=True)
        return self.out(self.norm(h))


class LitCharLM:
    """Lightning-like wrapper: owns the model, the loss and the optimizer config."""

    def __init__(self, cfg: LMConfig, lr: float, warmup: int):
        self.model = CharLM(cfg)
        self.lr, self.warmup = lr, warmup

    def training_step(self, batch):
        x, y = batch
        logits = self.model(x)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))

    @torch.no_grad()
    def validation_step(self, batch):
        return self.training_step(batch)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.model.parameters(), lr=self.lr, betas=(0.9, 0.95))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / self.warmup))
        return opt, sched


class CharChunks(Dataset):
    def __init__(self, path, ctx):
        data = open(path, "rb").read()
        self.data = torch.tensor(list(data), dtype=torch.long).clamp_(max=127)
        self.ctx = ctx

    def __len__(self):
        return (len(self.data) - 1) // self.ctx

    def __getitem__(self, i):
        s = i * self.ctx
        chunk = self.data[s:s + self.ctx + 1]
        return chunk[:-1], chunk[1:]


def shard_model(model: CharLM):
    for layer in model.layers:
        fully_shard(layer)
    fully_shard(model)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(HERE, "data", "corpus.txt"))
    ap.add_argument("--init-from", default=os.path.join(HERE, "data", "pretrained.pt"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--out", default=os.path.join(HERE, "runs", "fsdp_lm"))
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    cfg = LMConfig()
    lit = LitCharLM(cfg, args.lr, args.warmup)
    shard_model(lit.model)
    if args.init_from and os.path.exists(args.init_from):
        # continue from the single-process checkpoint
        state = torch.load(args.init_from, map_location="cpu")
        lit.model.load_state_dict(state)
        if rank == 0:
            print(f"loaded {len(state)} tensors from {args.init_from}", flush=True)
    opt, sched = lit.configure_optimizers()

    ds = CharChunks(args.corpus, cfg.ctx)
    n_val = len(ds) // 10
    train_ds = torch.utils.data.Subset(ds, range(n_val, len(ds)))
    val_ds = torch.utils.data.Subset(ds, range(n_val))
    train_sampler = DistributedSampler(train_ds, world, rank, shuffle=True, drop_last=True)
    val_sampler = DistributedSampler(val_ds, world, rank, shuffle=False, drop_last=True)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler)
    val_dl = DataLoader(val_ds, batch_size=args.batch_size, sampler=val_sampler)

    step = 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        lit.model.train()
        t0 = time.time()
        for batch in train_dl:
            loss = lit.training_step(batch)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            if rank == 0 and step % 25 == 0:
                print(f"epoch {epoch} step {step} loss {loss.item():.4f}", flush=True)

        lit.model.eval()
        val = torch.zeros(2)
        for batch in val_dl:
            val[0] += lit.validation_step(batch).item()
            val[1] += 1
        dist.all_reduce(val)
        if rank == 0:
            print(f"epoch {epoch} val_loss {val[0] / val[1]:.4f} "
                  f"({time.time() - t0:.1f}s)", flush=True)

    # sharded per-rank checkpoint
    os.makedirs(args.out, exist_ok=True)
    torch.save(lit.model.state_dict(), os.path.join(args.out, f"model_rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
