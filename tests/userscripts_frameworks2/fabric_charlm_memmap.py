#!/usr/bin/env python
"""Character-level GPT (nanoGPT-style) trained with Lightning Fabric.

Tokens live in uint16 .bin files read through np.memmap (as in nanoGPT / lit-gpt).
The corpus mix follows a small curriculum: each epoch the corpus is rebuilt with a
higher quality threshold, so later epochs see fewer, cleaner documents.

    torchrun --nproc-per-node 2 fabric_charlm_memmap.py
"""
import math
import os
import random
import shutil
import time
from dataclasses import dataclass
from datetime import timedelta

import lightning as L
import numpy as np
import torch
import torch.nn.functional as F
from lightning.fabric.strategies import DDPStrategy
from torch import nn


@dataclass
class TrainConfig:
    data_dir: str = "/tmp/fw2_fabric_charlm/data"
    out_dir: str = "/tmp/fw2_fabric_charlm/out"
    n_docs: int = 6000
    block_size: int = 64
    batch_size: int = 16
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    lr: float = 2e-3
    epochs: int = 3
    iters_per_epoch: int = 25
    eval_iters: int = 5
    quality_schedule: tuple = (0.0, 0.45, 0.6)  # min doc quality per epoch
    seed: int = 1337


WORDS = ["thou", "art", "the", "king", "of", "night", "and", "fair", "lady", "sword", "crown", "love", "doth",
         "hath", "my", "lord", "what", "light", "through", "yonder", "window", "breaks", "speak", "again"]


# ----------------------------------------------------------------------------- data
def make_documents(n_docs, seed):
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 10))) for _ in range(rng.randint(1, 6))]
        quality = rng.random()
        if quality < 0.3:  # scraped junk: mangled casing / stray symbols
            lines = [ln.upper() + " #@" for ln in lines]
        docs.append((quality, "\n".join(lines) + "\n\n"))
    return docs


def build_corpus(cfg, epoch):
    """Filter documents by quality for this epoch and write train.bin / val.bin + meta."""
    min_q = cfg.quality_schedule[min(epoch, len(cfg.quality_schedule) - 1)]
    docs = [text for q, text in make_documents(cfg.n_docs, cfg.seed) if q >= min_q]
    text = "".join(docs)
    chars = sorted(set("".join(text for _, text in make_documents(cfg.n_docs, cfg.seed))))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = np.array([stoi[c] for c in text], dtype=np.uint16)
    n_val = len(ids) // 10
    os.makedirs(cfg.data_dir, exist_ok=True)
    for name, arr in (("train", ids[n_val:]), ("val", ids[:n_val])):
        m = np.memmap(os.path.join(cfg.data_dir, f"{name}.bin"), dtype=np.uint16, mode="w+", shape=arr.shape)
        m[:] = arr
        m.flush()
        del m
    with open(os.path.join(cfg.data_dir, "meta.txt"), "w") as f:
        f.write(f"vocab_size={len(chars)}\nepoch={epoch}\nmin_quality={min_q}\ntrain_tokens={len(ids) - n_val}\n")
    return len(chars), len(ids) - n_val


class TokenBlocks:
    def __init__(self, path, block_size):
        self.data = np.memmap(path, dtype=np.uint16, mode="r")
        self.block_size = block_size

    def __len__(self):
        return len(self.data)

    def sample(self, batch_size, gen):
        ix = torch.randint(len(self.data) - self.block_size - 1, (batch_size,), generator=gen)
        x = torch.stack([torch.from_numpy(self.data[i: i + self.block_size].astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy(self.data[i + 1: i + 1 + self.block_size].astype(np.int64)) for i in ix])
        return x, y


# ---------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(cfg.n_embd), nn.LayerNorm(cfg.n_embd)
        self.attn = nn.MultiheadAttention(cfg.n_embd, cfg.n_head, dropout=cfg.dropout, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(cfg.n_embd, 4 * cfg.n_embd), nn.GELU(), nn.Linear(4 * cfg.n_embd, cfg.n_embd))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CharGPT(nn.Module):
    def __init__(self, cfg, vocab_size):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.head = nn.Linear(cfg.n_embd, vocab_size, bias=False)
        self.register_buffer("mask", torch.triu(torch.ones(cfg.block_size, cfg.block_size, dtype=torch.bool), 1))

    def forward(self, idx, targets=None):
        T = idx.size(1)
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x, self.mask[:T, :T])
        logits = self.head(self.ln_f(x))
        loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


@torch.no_grad()
def estimate_loss(fabric, model, data, cfg, gen):
    model.eval()
    losses = torch.zeros(cfg.eval_iters)
    for k in range(cfg.eval_iters):
        x, y = data.sample(cfg.batch_size, gen)
        losses[k] = model(x, y)[1].item()
    model.train()
    return fabric.all_reduce(losses.mean(), reduce_op="mean").item()


def main():
    cfg = TrainConfig()
    fabric = L.Fabric(accelerator="cpu", devices=2,
                      strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)))
    fabric.launch()
    fabric.seed_everything(cfg.seed)

    if fabric.global_rank == 0:
        shutil.rmtree(os.path.dirname(cfg.data_dir), ignore_errors=True)
        vocab_size, n_tok = build_corpus(cfg, epoch=0)
        fabric.print(f"corpus epoch 0: {n_tok} train tokens, vocab {vocab_size}")
    fabric.barrier()
    vocab_size = int(open(os.path.join(cfg.data_dir, "meta.txt")).read().split("vocab_size=")[1].split()[0])
    train_data = TokenBlocks(os.path.join(cfg.data_dir, "train.bin"), cfg.block_size)
    val_data = TokenBlocks(os.path.join(cfg.data_dir, "val.bin"), cfg.block_size)

    model = CharGPT(cfg, vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1)
    model, optimizer = fabric.setup(model, optimizer)
    gen = torch.Generator().manual_seed(cfg.seed + fabric.global_rank)
    total_iters = cfg.epochs * cfg.iters_per_epoch
    it = 0

    for epoch in range(cfg.epochs):
        if epoch > 0:
            # curriculum: rebuild the corpus with this epoch's quality threshold
            if fabric.global_rank == 0:
                _, n_tok = build_corpus(cfg, epoch)
                fabric.print(f"corpus epoch {epoch}: {n_tok} train tokens")
                train_data = TokenBlocks(os.path.join(cfg.data_dir, "train.bin"), cfg.block_size)
                val_data = TokenBlocks(os.path.join(cfg.data_dir, "val.bin"), cfg.block_size)
            fabric.barrier()

        t0 = time.time()
        for _ in range(cfg.iters_per_epoch):
            lr = cfg.lr * 0.5 * (1 + math.cos(math.pi * it / total_iters))
            for g in optimizer.param_groups:
                g["lr"] = lr
            x, y = train_data.sample(cfg.batch_size, gen)
            _, loss = model(x, y)
            fabric.backward(loss)
            fabric.clip_gradients(model, optimizer, max_norm=1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if it % 10 == 0:
                fabric.print(f"iter {it}: loss {loss.item():.4f} lr {lr:.2e}")
            it += 1
        val_loss = estimate_loss(fabric, model, val_data, cfg, gen)
        fabric.print(f"epoch {epoch} done in {time.time() - t0:.1f}s, val loss {val_loss:.4f}")
        fabric.save(os.path.join(cfg.out_dir, f"ckpt-epoch{epoch}.pt"),
                    {"model": model, "optimizer": optimizer, "iter": it, "config": cfg.__dict__})


if __name__ == "__main__":
    main()
