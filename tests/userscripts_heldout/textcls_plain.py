"""Bag-of-words sentiment classifier on the review export, one jsonl part per rank.

    torchrun --nproc-per-node 2 textcls_plain.py --data data/reviews
"""
import argparse
import collections
import json
import os
import re
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader

LABELS = ["negative", "positive"]
LABEL2ID = {name: i for i, name in enumerate(LABELS)}
PAD, UNK = 0, 1
TOKEN_RE = re.compile(r"[a-z']+")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data/reviews")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--max-vocab", type=int, default=5000)
    p.add_argument("--pg-timeout", type=float, default=10.0)
    return p.parse_args()


def read_part(data_dir, rank):
    path = os.path.join(data_dir, f"part-{rank:04d}.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def tokenize(text):
    return TOKEN_RE.findall(text.lower())


def build_vocab(records, max_size):
    counts = collections.Counter(tok for r in records for tok in tokenize(r["text"]))
    vocab = {"<pad>": PAD, "<unk>": UNK}
    for tok, _ in counts.most_common(max_size - len(vocab)):
        vocab[tok] = len(vocab)
    return vocab


def sync_vocab(vocab, rank):
    # every rank has to agree on the token ids, so rank 0's vocab wins
    obj = [vocab if rank == 0 else None]
    dist.broadcast_object_list(obj, src=0)
    return obj[0]


def make_collate(vocab):
    def collate(batch):
        ids = [[vocab.get(t, UNK) for t in tokenize(ex["text"])] for ex in batch]
        width = max(len(x) for x in ids)
        tokens = torch.full((len(batch), width), PAD, dtype=torch.long)
        for i, row in enumerate(ids):
            tokens[i, : len(row)] = torch.tensor(row)
        labels = torch.tensor([LABEL2ID[ex["label"]] for ex in batch])
        return tokens, labels

    return collate


class BowClassifier(nn.Module):
    def __init__(self, vocab_size, dim=64, n_classes=len(LABELS)):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, n_classes))

    def forward(self, tokens):
        mask = (tokens != PAD).unsqueeze(-1).float()
        pooled = (self.emb(tokens) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


def train_one_epoch(model, loader, opt, epoch, rank):
    model.train()
    total, correct, loss_sum = 0, 0, 0.0
    for step, (tokens, labels) in enumerate(loader):
        logits = model(tokens)
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss_sum += loss.item() * labels.numel()
        correct += (logits.argmax(-1) == labels).sum().item()
        total += labels.numel()
    stats = torch.tensor([loss_sum, correct, total], dtype=torch.float64)
    dist.all_reduce(stats)
    if rank == 0:
        print(f"epoch {epoch}: loss={stats[0] / stats[2]:.4f} acc={stats[1] / stats[2]:.3f}", flush=True)


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    records = read_part(args.data, rank)
    vocab = sync_vocab(build_vocab(records, args.max_vocab) if rank == 0 else None, rank)
    loader = DataLoader(records, batch_size=args.batch_size, shuffle=True,
                        collate_fn=make_collate(vocab), drop_last=True)

    model = DDP(BowClassifier(len(vocab)))
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    t0 = time.time()
    for epoch in range(args.epochs):
        train_one_epoch(model, loader, opt, epoch, rank)
    if rank == 0:
        print(f"done in {time.time() - t0:.1f}s", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
