"""Bag-of-tokens classifier.  Tokenised data is cached on the shared disk; whichever rank gets
there first builds the cache, the others reuse it."""
import argparse
import fcntl
import os
import time
from contextlib import contextmanager
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 5000


@contextmanager
def file_lock(path):
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def tokenize_corpus(n_docs=2048, doc_len=48, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, VOCAB, (n_docs, doc_len), generator=g)
    labels = (tokens < VOCAB // 10).sum(1).gt(doc_len // 10).long()
    time.sleep(1.0)  # stands in for the real tokenizer
    return tokens, labels


def get_dataset(cache_dir):
    os.makedirs(cache_dir, exist_ok=True)
    cache = os.path.join(cache_dir, "tokens.pt")
    with file_lock(os.path.join(cache_dir, ".lock")):
        if not os.path.exists(cache):
            print(f"rank {dist.get_rank()}: building token cache {cache}", flush=True)
            tokens, labels = tokenize_corpus()
            torch.save({"tokens": tokens, "labels": labels}, cache)
        dist.barrier()
        data = torch.load(cache)
    return TensorDataset(data["tokens"], data["labels"])


class BagOfTokens(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.emb = nn.EmbeddingBag(VOCAB, dim, mode="mean")
        self.out = nn.Linear(dim, 2)

    def forward(self, tokens):
        return self.out(self.emb(tokens))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--cache-dir", default=os.path.join(HERE, "checkpoints", "train_token_cache"))
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank = dist.get_rank()
    ds = get_dataset(args.cache_dir)
    sampler = DistributedSampler(ds)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler)
    model = DDP(BagOfTokens())
    opt = torch.optim.Adam(model.parameters(), lr=5e-3)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        hits = 0
        for tokens, labels in loader:
            logits = model(tokens)
            loss = nn.functional.cross_entropy(logits, labels)
            opt.zero_grad()
            loss.backward()
            opt.step()
            hits += (logits.argmax(1) == labels).sum().item()
        print(f"[rank {rank}] Epoch {epoch} | Steps: {len(loader)} | acc {hits / len(sampler):.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
