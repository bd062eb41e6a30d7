"""Tiny causal LM pretraining with a Trainer class.

Rank 0 tokenizes the corpus once and spills the token shards to a scratch
directory; the other ranks load the shards from there instead of tokenizing
again.  Launch:  torchrun --nproc-per-node 2 tokcache_trainer.py
"""
import argparse
import glob
import logging
import math
import os
import random
import tempfile
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

log = logging.getLogger("tokcache")

WORDS = ("the model learns to predict the next token from a short window of "
         "text and we check that the loss goes down over a few epochs while "
         "every rank sees a different slice of the corpus").split()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=32)
    p.add_argument("--n-docs", type=int, default=2000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def make_corpus(n_docs, seed):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
            for _ in range(n_docs)]


def tokenize(docs, seq_len):
    ids = []
    for d in docs:
        ids.extend(d.encode("utf-8"))
        ids.append(0)  # document separator
    n = len(ids) // (seq_len + 1)
    return np.asarray(ids[: n * (seq_len + 1)], dtype=np.int64).reshape(n, seq_len + 1)


def build_token_cache(n_docs, seq_len, seed, n_shards=4):
    """Tokenize once and write shards to a scratch dir the other ranks can read."""
    scratch = tempfile.TemporaryDirectory(prefix="tokcache-")
    t0 = time.time()
    tokens = tokenize(make_corpus(n_docs, seed), seq_len)
    for i, chunk in enumerate(np.array_split(tokens, n_shards)):
        np.save(os.path.join(scratch.name, f"shard_{i:03d}.npy"), chunk)
    log.info("tokenized %d docs into %d windows in %.2fs -> %s",
             n_docs, len(tokens), time.time() - t0, scratch.name)
    return scratch.name, tokens


def load_token_cache(path):
    shards = sorted(glob.glob(os.path.join(path, "shard_*.npy")))
    if not shards:
        raise FileNotFoundError(f"no token shards found under {path}")
    return np.concatenate([np.load(s) for s in shards])


class WindowDataset(Dataset):
    def __init__(self, windows):
        self.windows = torch.from_numpy(windows)

    def __len__(self):
        return len(self.windows)

    def __getitem__(self, i):
        w = self.windows[i]
        return w[:-1], w[1:]


class TinyLM(nn.Module):
    def __init__(self, vocab=256, dim=64, seq_len=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.pos = nn.Parameter(torch.zeros(seq_len, dim))
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(dim, vocab)
        mask = torch.triu(torch.full((seq_len, seq_len), float("-inf")), diagonal=1)
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        h = self.emb(x) + self.pos[: x.size(1)]
        h = self.enc(h, mask=self.mask[: x.size(1), : x.size(1)])
        return self.head(h)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        torch.manual_seed(args.seed)
        self.train_ds = self._load_data()
        self.sampler = DistributedSampler(self.train_ds, shuffle=True, seed=args.seed)
        self.loader = DataLoader(self.train_ds, batch_size=args.batch_size,
                                 sampler=self.sampler, drop_last=True)
        self.model = DDP(TinyLM(seq_len=args.seq_len))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=0.01)
        total = args.epochs * len(self.loader)
        warmup = max(1, total // 10)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))

    def _load_data(self):
        # only the main process tokenizes; everyone else reads the cached shards
        box = [None]
        if self.rank == 0:
            cache_dir, windows = build_token_cache(self.args.n_docs, self.args.seq_len, self.args.seed)
            box[0] = cache_dir
        dist.broadcast_object_list(box, src=0)
        if self.rank != 0:
            windows = load_token_cache(box[0])
            log.info("loaded %d cached windows from %s", len(windows), box[0])
        return WindowDataset(windows)

    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        tot, n = torch.zeros(()), 0
        for x, y in self.loader:
            logits = self.model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.sched.step()
            tot += loss.detach()
            n += 1
        stats = torch.tensor([tot.item(), float(n)])
        dist.all_reduce(stats)
        return stats[0].item() / max(stats[1].item(), 1.0)

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            loss = self.train_epoch(epoch)
            if self.rank == 0:
                log.info("epoch %d loss %.4f lr %.2e (%.1fs)", epoch, loss,
                         self.sched.get_last_lr()[0], time.time() - t0)


def main():
    args = parse_args()
    logging.basicConfig(level=logging.INFO,
                        format=f"[rank{os.environ.get('RANK', '0')}] %(asctime)s %(message)s")
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
