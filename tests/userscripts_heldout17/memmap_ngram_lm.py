"""N-gram MLP language model trained from a memory-mapped token cache.

The corpus is tokenised into a flat uint16 file (nanoGPT-style) and every
rank samples random windows from it through np.memmap, so nothing is held in
RAM.  Between epochs the cache is refilled with the next shard of documents
(a cheap curriculum over a corpus that doesn't fit in one cache file).  One
rank does the tokenising; the others just wait for it at a barrier.
"""
import argparse
import json
import logging
import os
import shutil
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

CACHE_DIR = "/tmp/ho17_memmap_lm"
log = logging.getLogger("ngram")


def fake_documents(shard, n_docs, vocab, seed):
    """Documents from a few topic-specific unigram tables; random lengths."""
    rng = np.random.default_rng(seed + 7919 * shard)
    topics = np.random.default_rng(seed).dirichlet(np.full(vocab, 0.05), size=8)
    for _ in range(n_docs):
        t = rng.integers(len(topics))
        length = int(rng.integers(64, 2048))
        body = rng.choice(vocab - 1, size=length, p=topics[t][:-1] / topics[t][:-1].sum())
        yield np.concatenate([body, [vocab - 1]])  # last id = end-of-document


class TokenCache:
    def __init__(self, path):
        self.path = path
        self._mm = None

    @property
    def tokens(self):
        # open lazily, once; re-creating the memmap for every batch is slow
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint16, mode="r")
        return self._mm

    def __len__(self):
        return len(self.tokens)

    def fill(self, docs):
        """Tokenise `docs` into the cache file (overwrites in place)."""
        arr = np.concatenate(list(docs)).astype(np.uint16)
        mm = np.memmap(self.path, dtype=np.uint16, mode="w+", shape=arr.shape)
        mm[:] = arr
        mm.flush()
        del mm
        self._mm = None
        with open(self.path + ".json", "w") as f:
            json.dump({"n_tokens": int(arr.size)}, f)
        return arr.size


def window_batches(cache, ctx, batch_size, n_batches, rng):
    """Generator of (context, next-token) batches sampled from the memmap."""
    for _ in range(n_batches):
        starts = rng.integers(0, len(cache) - ctx - 1, size=batch_size)
        win = np.stack([cache.tokens[s:s + ctx + 1] for s in starts]).astype(np.int64)
        w = torch.from_numpy(win)
        yield w[:, :-1], w[:, -1]


class NGramMLP(nn.Module):
    def __init__(self, vocab, ctx, dim=48, hidden=256):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.mlp = nn.Sequential(nn.Linear(ctx * dim, hidden), nn.Tanh(), nn.Linear(hidden, vocab))

    def forward(self, ctx_ids):
        return self.mlp(self.emb(ctx_ids).flatten(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--ctx", type=int, default=8)
    ap.add_argument("--docs-per-shard", type=int, default=400)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--steps-per-epoch", type=int, default=30)
    ap.add_argument("--micro-batch", type=int, default=64)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=2029)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    # rank 0 already does logging + checkpoints, so give tokenising to the last rank
    is_tokenizer = rank % world == world - 1
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s r{rank}{'*' if is_tokenizer else ''} %(message)s")

    cache = TokenCache(os.path.join(CACHE_DIR, "tokens.u16"))
    if is_tokenizer:
        shutil.rmtree(CACHE_DIR, ignore_errors=True)
        os.makedirs(CACHE_DIR)
        n = cache.fill(fake_documents(0, args.docs_per_shard, args.vocab, args.seed))
        log.info("cache filled with shard 0: %d tokens", n)
    dist.barrier()

    torch.manual_seed(args.seed)
    model = DDP(NGramMLP(args.vocab, args.ctx))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(args.seed + rank)

    for epoch in range(args.epochs):
        t0, tot = time.time(), 0.0
        batches = window_batches(cache, args.ctx, args.micro_batch,
                                 args.steps_per_epoch * args.accum, rng)
        for i, (x, y) in enumerate(batches):
            last_micro = (i + 1) % args.accum == 0
            if last_micro:
                loss = F.cross_entropy(model(x), y) / args.accum
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            else:
                with model.no_sync():
                    loss = F.cross_entropy(model(x), y) / args.accum
                    loss.backward()
            tot += loss.item()
        loss_t = torch.tensor([tot / args.steps_per_epoch])
        dist.all_reduce(loss_t)
        log.info("epoch %d train_loss %.4f (%.1fs, cache %d tokens)", epoch,
                 loss_t.item() / world, time.time() - t0, len(cache))

        if rank == 0:
            torch.save({"epoch": epoch, "model": model.module.state_dict()},
                       os.path.join(CACHE_DIR, "ngram_last.pt"))

        if epoch + 1 < args.epochs:
            # refill the cache with the next shard; memmaps are backed by the
            # page cache, so the other ranks see the new tokens after the barrier
            if is_tokenizer:
                n = cache.fill(fake_documents(epoch + 1, args.docs_per_shard, args.vocab, args.seed))
                log.info("cache refilled with shard %d: %d tokens", epoch + 1, n)
            dist.barrier()

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
