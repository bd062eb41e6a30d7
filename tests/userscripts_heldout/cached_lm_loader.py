"""Tiny next-token LM over per-rank text shards with an in-memory token cache.

Shard files come pre-tokenised from the preprocessing job when available;
whatever is missing is tokenised in a background thread while the first
batches run. DataLoader workers pull token windows out of the same cache.

    torchrun --nproc-per-node 2 cached_lm_loader.py --manifest data/lm_corpus/manifest.json
"""
import argparse
import json
import os
import re
import threading
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset

VOCAB = 4096
SEQ = 32
WORD_RE = re.compile(r"\w+|[^\w\s]")


def token_id(word):
    return zlib.crc32(word.encode()) % (VOCAB - 1) + 1


class TokenCache:
    """Token ids per shard file.

    Files that the preprocessing job already handled have a `<file>.ids` next
    to them (raw int32); anything else is tokenised here.
    """

    def __init__(self, paths):
        self.paths = list(paths)
        self._lock = threading.Lock()
        self._tokens = {}
        self._warmer = None

    @staticmethod
    def _cache_file(path):
        ids = path + ".ids"
        if os.path.exists(ids) and os.path.getmtime(ids) >= os.path.getmtime(path):
            return ids
        return None

    @staticmethod
    def _tokenize(path):
        ids = []
        with open(path) as f:
            for line in f:
                ids.extend(token_id(w) for w in WORD_RE.findall(line.lower()))
        return torch.tensor(ids, dtype=torch.int32)

    def load_preprocessed(self):
        for path in self.paths:
            ids = self._cache_file(path)
            if ids is not None:
                self._tokens[path] = torch.from_file(ids, size=os.path.getsize(ids) // 4, dtype=torch.int32)
        return len(self._tokens)

    def _warm_missing(self):
        t0 = time.time()
        with self._lock:
            missing = [p for p in self.paths if p not in self._tokens]
            for path in missing:
                self._tokens[path] = self._tokenize(path)
        if missing:
            print(f"[pid {os.getpid()}] tokenised {len(missing)} files in {time.time() - t0:.1f}s", flush=True)

    def warm_in_background(self):
        """Tokenise files without a preprocessed cache while training gets going."""
        self._warmer = threading.Thread(target=self._warm_missing, name="token-cache-warmer", daemon=True)
        self._warmer.start()

    def get(self, path):
        with self._lock:
            if path not in self._tokens:
                self._tokens[path] = self._tokenize(path)
            return self._tokens[path]


class WindowDataset(Dataset):
    def __init__(self, cache, windows_per_file=64):
        self.cache = cache
        self.items = [(p, k) for p in cache.paths for k in range(windows_per_file)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, k = self.items[i]
        toks = self.cache.get(path)
        start = (k * 7919) % max(1, len(toks) - SEQ - 1)
        window = toks[start:start + SEQ + 1].long()
        return window[:-1], window[1:]


class TinyLM(nn.Module):
    def __init__(self, d=128):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.rnn = nn.GRU(d, d, batch_first=True)
        self.out = nn.Linear(d, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--manifest", default="data/lm_corpus/manifest.json")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    rank = int(os.environ.get("RANK", 0))
    with open(args.manifest) as f:
        files = json.load(f)[str(rank)]
    root = os.path.dirname(args.manifest)
    cache = TokenCache(os.path.join(root, name) for name in files)
    n_ready = cache.load_preprocessed()
    print(f"[rank {rank}] {n_ready}/{len(files)} shard files preprocessed", flush=True)

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(0)
    model = DDP(TinyLM())
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)
    loader = DataLoader(WindowDataset(cache), batch_size=args.batch_size, shuffle=True,
                        num_workers=args.workers, drop_last=True)
    cache.warm_in_background()

    for epoch in range(args.epochs):
        t0 = time.time()
        total = torch.zeros(2)
        for x, y in loader:
            loss = F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item(), 1.0])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch} loss {total[0] / total[1]:.3f} ({time.time() - t0:.1f}s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
