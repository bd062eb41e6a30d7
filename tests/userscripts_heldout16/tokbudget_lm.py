"""Tiny causal LM trained with dynamic (token-budget) batching.

Sequences are bucketed by length and packed into batches of at most --max-tokens
padded tokens, like fairseq / many speech recipes, so short sequences get big
batches and long ones small batches.

    torchrun --nproc-per-node 2 tokbudget_lm.py
"""
import argparse
import json
import math
import os
import random
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

PAD = 0


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus.jsonl"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=1024)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vocab", type=int, default=500)
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def load_corpus(path):
    with open(path) as f:
        return [json.loads(line)["input_ids"] for line in f if line.strip()]


class TokenBudgetBatcher:
    """Shards the corpus across ranks, then groups each shard into length buckets
    and fills batches up to max_tokens (batch_size * longest_len)."""

    def __init__(self, lengths, max_tokens, rank, world_size, seed=0):
        self.lengths = lengths
        self.max_tokens = max_tokens
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def _batches(self):
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        shard = order[self.rank::self.world_size]
        # sort by length so padding is minimal
        shard.sort(key=lambda i: self.lengths[i])
        batches, cur, longest = [], [], 0
        for idx in shard:
            n = self.lengths[idx]
            if cur and max(longest, n) * (len(cur) + 1) > self.max_tokens:
                batches.append(cur)
                cur, longest = [], 0
            cur.append(idx)
            longest = max(longest, n)
        if cur:
            batches.append(cur)
        rng = random.Random(self.seed + self.epoch)
        rng.shuffle(batches)
        return batches

    def __iter__(self):
        return iter(self._batches())

    def __len__(self):
        return len(self._batches())


def collate(seqs):
    longest = max(len(s) for s in seqs)
    x = torch.full((len(seqs), longest), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        x[i, : len(s)] = torch.tensor(s)
    return x


class TinyLM(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.head(h)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        torch.manual_seed(args.seed)
        self.corpus = load_corpus(args.data)
        n_val = 64
        self.val = self.corpus[:n_val]
        self.train = self.corpus[n_val:]
        self.batcher = TokenBudgetBatcher([len(s) for s in self.train], args.max_tokens,
                                          self.rank, self.world, seed=args.seed)
        self.model = DDP(TinyLM(args.vocab, args.dim))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        self.step = 0

    def log(self, msg):
        if self.rank == 0:
            print(f"[trainer] {msg}", flush=True)

    def lm_loss(self, x):
        logits = self.model(x[:, :-1])
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1), ignore_index=PAD)

    def train_epoch(self, epoch):
        self.model.train()
        self.batcher.set_epoch(epoch)
        total, n = 0.0, 0
        for batch_idx in self.batcher:
            x = collate([self.train[i] for i in batch_idx])
            loss = self.lm_loss(x)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            total += loss.item()
            n += 1
            self.step += 1
            if self.step % 10 == 0:
                self.log(f"epoch {epoch} step {self.step} loss {loss.item():.3f}")
        return total / max(n, 1)

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        shard = self.val[self.rank::self.world]
        tot = torch.zeros(2)
        for i in range(0, len(shard), 16):
            x = collate(shard[i:i + 16])
            logits = self.model.module(x[:, :-1])
            tgt = x[:, 1:]
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1),
                                   ignore_index=PAD, reduction="sum")
            tot += torch.tensor([loss.item(), (tgt != PAD).sum().item()])
        dist.all_reduce(tot)
        return tot[0].item() / tot[1].item()

    def fit(self):
        self.log(f"{len(self.train)} train seqs, {len(self.val)} val seqs, world {self.world}")
        for epoch in range(self.args.epochs):
            t0 = time.time()
            train_loss = self.train_epoch(epoch)
            val_loss = self.evaluate()
            self.log(f"epoch {epoch} train {train_loss:.3f} val {val_loss:.3f} "
                     f"ppl {math.exp(val_loss):.1f} ({time.time() - t0:.1f}s)")


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
