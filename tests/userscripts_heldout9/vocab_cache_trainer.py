"""Char-level text classifier, trained with DDP.

The vocabulary is built once on rank 0 (tokenising the whole corpus is the slow
part) and shared with the other ranks through the c10d store, so we don't have
to write yet another file to the shared filesystem.
"""
import argparse
import json
import os
import time
from collections import Counter
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default=os.path.join(HERE, "data", "reviews.jsonl"))
    p.add_argument("--vocab-cache", default=os.path.join(HERE, "cache", "vocab.json"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--max-len", type=int, default=64)
    p.add_argument("--min-freq", type=int, default=2)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def log(msg):
    rank = dist.get_rank() if dist.is_initialized() else -1
    print(f"[rank {rank}] {time.strftime('%H:%M:%S')} {msg}", flush=True)


class ReviewDataset(Dataset):
    def __init__(self, rows, stoi, max_len):
        self.rows = rows
        self.stoi = stoi
        self.max_len = max_len

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        text, label = self.rows[i]["text"], self.rows[i]["label"]
        ids = [self.stoi.get(c, 1) for c in text[: self.max_len]]
        ids += [0] * (self.max_len - len(ids))
        return torch.tensor(ids), torch.tensor(label)


class CharCNN(nn.Module):
    def __init__(self, vocab_size, dim=48, n_classes=2):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, dim, kernel_size=5, padding=2)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, x):
        h = self.emb(x).transpose(1, 2)
        h = F.relu(self.conv(h)).max(dim=2).values
        return self.head(h)


class Trainer:
    def __init__(self, args):
        self.args = args
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.store = dist.distributed_c10d._get_default_store()
        with open(args.data) as f:
            self.rows = [json.loads(line) for line in f]
        self.stoi = self._shared_vocab()
        log(f"vocab size {len(self.stoi)}")

        torch.manual_seed(0)
        self.model = DDP(CharCNN(len(self.stoi)))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr)
        ds = ReviewDataset(self.rows, self.stoi, args.max_len)
        self.sampler = DistributedSampler(ds, shuffle=True, seed=17)
        self.loader = DataLoader(ds, batch_size=args.batch_size, sampler=self.sampler)

    # ---- vocabulary -------------------------------------------------------
    def _build_vocab(self):
        counts = Counter()
        for r in self.rows:
            counts.update(r["text"])
        itos = ["<pad>", "<unk>"] + sorted(c for c, n in counts.items() if n >= self.args.min_freq)
        return {c: i for i, c in enumerate(itos)}

    def _shared_vocab(self):
        if self.rank == 0:
            if os.path.exists(self.args.vocab_cache):
                log(f"loading cached vocab from {self.args.vocab_cache}")
                with open(self.args.vocab_cache) as f:
                    return json.load(f)
            t0 = time.time()
            stoi = self._build_vocab()
            os.makedirs(os.path.dirname(self.args.vocab_cache), exist_ok=True)
            with open(self.args.vocab_cache, "w") as f:
                json.dump(stoi, f)
            self.store.set("vocab", json.dumps(stoi))
            log(f"built vocab in {time.time() - t0:.2f}s and published it")
            return stoi
        # other ranks: block until rank 0 has published the vocab
        return json.loads(self.store.get("vocab"))

    # ---- training ---------------------------------------------------------
    def train_epoch(self, epoch):
        self.model.train()
        self.sampler.set_epoch(epoch)
        tot, n = torch.zeros(2), 0
        for x, y in self.loader:
            logits = self.model(x)
            loss = F.cross_entropy(logits, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            tot[0] += loss.item() * len(y)
            tot[1] += (logits.argmax(1) == y).sum()
            n += len(y)
        stats = torch.tensor([tot[0], tot[1], float(n)])
        dist.all_reduce(stats)
        return stats[0] / stats[2], stats[1] / stats[2]

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            loss, acc = self.train_epoch(epoch)
            if self.rank == 0:
                log(f"epoch {epoch} loss {loss:.4f} acc {acc:.3f} ({time.time() - t0:.1f}s)")
        dist.barrier()

    def close(self):
        dist.destroy_process_group()


def main():
    args = parse_args()
    trainer = Trainer(args)
    try:
        trainer.fit()
    finally:
        trainer.close()
    log("done")


if __name__ == "__main__":
    main()
