"""Character-level LM on a toy corpus, sharded with FSDP (CPU / gloo).

* FSDP with a per-block wrap policy, activation checkpointing inside blocks
* gradient accumulation using FSDP.no_sync() on the non-boundary micro-steps
* a custom sampler that hands each rank an equal contiguous slice of windows
* validation perplexity reduced across ranks with an async all_reduce
* early stopping on the global validation loss, full-state-dict checkpoint
"""
import logging
import math
import os
import shutil
import sys
import time
from dataclasses import dataclass, asdict
from datetime import timedelta
from functools import partial

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.fsdp import StateDictType, FullStateDictConfig
from torch.distributed.fsdp.wrap import ModuleWrapPolicy
from torch.utils.checkpoint import checkpoint
from torch.utils.data import Dataset, DataLoader, Sampler


@dataclass
class Config:
    run_dir: str = "/tmp/ho17_fsdp_charlm"
    corpus_chars: int = 60_000
    ctx: int = 64
    d_model: int = 64
    n_heads: int = 4
    n_layers: int = 2
    batch_size: int = 16
    accum_steps: int = 2
    max_epochs: int = 6
    steps_per_epoch: int = 8
    lr: float = 2e-3
    patience: int = 2
    min_delta: float = 1e-3
    seed: int = 7


def build_corpus(n_chars, seed):
    """A seeded 'language' of pseudo-words so the LM has structure to learn."""
    g = torch.Generator().manual_seed(seed)
    syll = ["ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "qu", "an", "el"]
    words = []
    for _ in range(200):
        k = int(torch.randint(1, 4, (1,), generator=g))
        words.append("".join(syll[int(i)] for i in torch.randint(len(syll), (k,), generator=g)))
    out, n = [], 0
    while n < n_chars:
        length = int(torch.randint(3, 9, (1,), generator=g))
        sent = " ".join(words[int(i)] for i in torch.randint(len(words), (length,), generator=g)) + ". "
        out.append(sent)
        n += len(sent)
    text = "".join(out)[:n_chars]
    vocab = sorted(set(text))
    stoi = {c: i for i, c in enumerate(vocab)}
    return torch.tensor([stoi[c] for c in text], dtype=torch.long), vocab


class Windows(Dataset):
    def __init__(self, ids, ctx):
        self.ids, self.ctx = ids, ctx

    def __len__(self):
        return (len(self.ids) - 1) // self.ctx

    def __getitem__(self, i):
        s = i * self.ctx
        chunk = self.ids[s:s + self.ctx + 1]
        return chunk[:-1], chunk[1:]


class ContiguousSliceSampler(Sampler):
    """Each rank gets an equal, contiguous block of windows (shuffled inside).

    Unlike DistributedSampler we never pad/duplicate; the tail that doesn't
    divide evenly is dropped so every rank runs the same number of steps.
    """

    def __init__(self, n, rank, world, seed, shuffle=True):
        self.per_rank = n // world
        self.start = rank * self.per_rank
        self.seed, self.shuffle, self.epoch = seed, shuffle, 0

    def set_epoch(self, e):
        self.epoch = e

    def __len__(self):
        return self.per_rank

    def __iter__(self):
        idx = torch.arange(self.start, self.start + self.per_rank)
        if self.shuffle:
            g = torch.Generator().manual_seed(self.seed + self.epoch)
            idx = idx[torch.randperm(len(idx), generator=g)]
        return iter(idx.tolist())


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def _inner(self, x):
        T = x.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        a = self.ln1(x)
        x = x + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))

    def forward(self, x):
        if self.training:
            return checkpoint(self._inner, x, use_reentrant=False)
        return self._inner(x)


class CharLM(nn.Module):
    def __init__(self, vocab, cfg):
        super().__init__()
        self.tok = nn.Embedding(vocab, cfg.d_model)
        self.pos = nn.Parameter(torch.zeros(1, cfg.ctx, cfg.d_model))
        self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.n_heads) for _ in range(cfg.n_layers))
        self.ln = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, vocab)

    def forward(self, x):
        h = self.tok(x) + self.pos[:, : x.shape[1]]
        for b in self.blocks:
            h = b(h)
        return self.head(self.ln(h))


@torch.no_grad()
def evaluate(model, loader):
    model.eval()
    stats = torch.zeros(2, dtype=torch.float64)  # [sum nll, n tokens]
    for x, y in loader:
        logits = model(x)
        stats[0] += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum").item()
        stats[1] += y.numel()
    work = dist.all_reduce(stats, async_op=True)
    model.train()
    work.wait()
    return (stats[0] / stats[1]).item()


def main():
    cfg = Config()
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(stream=sys.stdout, level=logging.INFO,
                        format=f"[r{rank}] %(asctime)s %(message)s")
    log = logging.getLogger(__name__)
    lead = rank == 0
    if lead:
        shutil.rmtree(cfg.run_dir, ignore_errors=True)
        os.makedirs(cfg.run_dir)
        log.info("config %s", asdict(cfg))
    dist.barrier()

    torch.manual_seed(cfg.seed)
    ids, vocab = build_corpus(cfg.corpus_chars, cfg.seed)
    split = int(0.9 * len(ids))
    train_ds, val_ds = Windows(ids[:split], cfg.ctx), Windows(ids[split:], cfg.ctx)
    train_sampler = ContiguousSliceSampler(len(train_ds), rank, world, cfg.seed)
    val_sampler = ContiguousSliceSampler(len(val_ds), rank, world, cfg.seed, shuffle=False)
    train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, sampler=train_sampler, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=cfg.batch_size, sampler=val_sampler)

    model = FSDP(CharLM(len(vocab), cfg), auto_wrap_policy=ModuleWrapPolicy({Block}),
                 device_id=torch.device("cpu"), use_orig_params=True)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    best, bad_epochs = math.inf, 0

    for epoch in range(cfg.max_epochs):
        train_sampler.set_epoch(epoch)
        t0, seen, tot = time.time(), 0, 0.0
        it = iter(train_dl)
        steps = min(cfg.steps_per_epoch, len(train_dl) // cfg.accum_steps)
        for step in range(steps):
            for micro in range(cfg.accum_steps):
                x, y = next(it)
                boundary = micro == cfg.accum_steps - 1
                ctx = model.no_sync() if not boundary else torch.enable_grad()
                with ctx:
                    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten()) / cfg.accum_steps
                    loss.backward()
                tot += loss.item()
            model.clip_grad_norm_(1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)
            seen += 1
        val = evaluate(model, val_dl)
        log.info("epoch %d train_loss %.3f val_loss %.3f ppl %.2f (%.1fs)",
                 epoch, tot / seen, val, math.exp(val), time.time() - t0)

        if val < best - cfg.min_delta:
            best, bad_epochs = val, 0
            with FSDP.state_dict_type(model, StateDictType.FULL_STATE_DICT,
                                      FullStateDictConfig(offload_to_cpu=False, rank0_only=True)):
                sd = model.state_dict()
            if lead:
                torch.save({"model": sd, "epoch": epoch, "val_loss": val, "vocab": vocab},
                           os.path.join(cfg.run_dir, "best.pt"))
                log.info("saved best.pt")
        else:
            bad_epochs += 1
            if bad_epochs >= cfg.patience:
                log.info("early stopping at epoch %d (best val %.3f)", epoch, best)
                break

    dist.barrier()
    if lead:
        ck = torch.load(os.path.join(cfg.run_dir, "best.pt"), weights_only=True)
        log.info("best checkpoint: epoch %d val %.3f", ck["epoch"], ck["val_loss"])
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
