"""Streaming classifier pretraining over webdataset-style tar shards.

torchrun --nproc-per-node 2 stream_pretrain.py
"""
import argparse
import glob
import io
import os
import tarfile
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset

p = argparse.ArgumentParser()
p.add_argument("--shards", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "shards", "crawl-*.tar"))
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--lr", type=float, default=3e-3)
p.add_argument("--min-tokens", type=int, default=5)
p.add_argument("--max-tokens", type=int, default=48)
p.add_argument("--vocab-size", type=int, default=4096)
p.add_argument("--pg-timeout", type=int, default=10)
args = p.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)


def log(*a):
    print(f"[rank{rank}]", *a, flush=True)


def hash_tokens(text, vocab_size, max_tokens):
    # hashing trick, no tokenizer needed
    ids = [(zlib.crc32(w.encode()) % (vocab_size - 1)) + 1 for w in text.lower().split()][:max_tokens]
    return ids


class TarShardStream(IterableDataset):
    """Iterates (text, label) pairs from tar shards assigned to this rank."""

    def __init__(self, pattern, rank, world, min_tokens, max_tokens, vocab_size):
        files = sorted(glob.glob(pattern))
        if not files:
            raise FileNotFoundError(pattern)
        self.files = files[rank::world]
        self.min_tokens, self.max_tokens, self.vocab_size = min_tokens, max_tokens, vocab_size

    def samples(self, path):
        with tarfile.open(path, "r") as tf:
            group = {}
            for m in tf.getmembers():
                key, ext = m.name.rsplit(".", 1)
                group.setdefault(key, {})[ext] = tf.extractfile(m).read().decode()
                if len(group[key]) == 2:
                    yield group.pop(key)

    def __iter__(self):
        for path in self.files:
            for s in self.samples(path):
                text = s["txt"].strip()
                # quality filter: drop nav bars / boilerplate
                if len(text.split()) < self.min_tokens:
                    continue
                yield hash_tokens(text, self.vocab_size, self.max_tokens), int(s["cls"])


def collate(batch):
    L = max(len(ids) for ids, _ in batch)
    x = torch.zeros(len(batch), L, dtype=torch.long)
    for i, (ids, _) in enumerate(batch):
        x[i, : len(ids)] = torch.tensor(ids)
    y = torch.tensor([c for _, c in batch])
    return x, y


class BagClassifier(nn.Module):
    def __init__(self, vocab, dim=64, n_cls=4):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean", padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(dim, 128), nn.GELU(), nn.Linear(128, n_cls))

    def forward(self, x):
        return self.mlp(self.emb(x))


ds = TarShardStream(args.shards, rank, world, args.min_tokens, args.max_tokens, args.vocab_size)
loader = DataLoader(ds, batch_size=args.batch_size, collate_fn=collate, num_workers=0)
log("shards:", [os.path.basename(f) for f in ds.files])

model = DDP(BagClassifier(args.vocab_size))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

for epoch in range(args.epochs):
    model.train()
    t0 = time.time()
    tot_loss, tot_correct, tot_n = 0.0, 0, 0
    for step, (x, y) in enumerate(loader):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tot_loss += loss.item() * len(y)
        tot_correct += (logits.argmax(-1) == y).sum().item()
        tot_n += len(y)
        if step % 4 == 0:
            log(f"epoch {epoch} step {step} loss {loss.item():.4f}")

    # epoch summary across ranks
    stats = torch.tensor([tot_loss, float(tot_correct), float(tot_n)])
    dist.all_reduce(stats)
    if rank == 0:
        log(f"epoch {epoch}: loss {stats[0] / stats[2]:.4f} acc {stats[1] / stats[2]:.3f} "
            f"samples {int(stats[2])} ({time.time() - t0:.1f}s)")

if rank == 0:
    torch.save(model.module.state_dict(), os.path.join(os.path.dirname(os.path.abspath(__file__)), "bag_classifier.pt"))
    log("saved")
dist.barrier()
dist.destroy_process_group()
