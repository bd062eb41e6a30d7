# Bag-of-words sentiment classifier, one JSONL shard per rank.
# Shards live on a network mount that occasionally returns short reads, so the
# loader retries with exponential backoff before giving up.
#
#   torchrun --nproc-per-node 2 retry_shards.py
import argparse
import functools
import json
import os
import random
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--data-dir", default="data")
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--lr", type=float, default=0.05)
parser.add_argument("--retries", type=int, default=5)
parser.add_argument("--backoff", type=float, default=1.0)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(1234)
random.seed(1234 + rank)


def log(*a):
    print(f"[rank{rank}]", *a, flush=True)


def retry(tries, backoff, exceptions=(Exception,)):
    """Retry a flaky I/O call with exponential backoff."""
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*a, **kw):
            delay = backoff
            for attempt in range(1, tries + 1):
                try:
                    return fn(*a, **kw)
                except exceptions as e:
                    if attempt == tries:
                        raise
                    log(f"{fn.__name__} failed (attempt {attempt}/{tries}): {e!r}; "
                        f"retrying in {delay:.1f}s")
                    time.sleep(delay)
                    delay *= 2
        return wrapper
    return deco


@retry(tries=args.retries, backoff=args.backoff)
def load_shard(path):
    records = []
    with open(path) as f:
        for line in f:
            if line.strip():
                records.append(json.loads(line))
    return records


# fixed vocabulary shared by every rank (hashing trick, no per-shard vocab)
VOCAB_SIZE = 4096


def encode(text):
    ids = [hash_token(t) for t in text.split()]
    return torch.tensor(ids, dtype=torch.long)


def hash_token(tok):
    h = 0
    for ch in tok:
        h = (h * 131 + ord(ch)) % VOCAB_SIZE
    return h


shard_path = os.path.join(args.data_dir, f"shard-{rank:05d}.jsonl")
t0 = time.time()
records = load_shard(shard_path)
log(f"loaded {len(records)} records from {shard_path} in {time.time() - t0:.2f}s")

examples = [(encode(r["text"]), int(r["label"])) for r in records]
n_val = len(examples) // 10
val_examples, train_examples = examples[:n_val], examples[n_val:]


class BagOfWords(nn.Module):
    def __init__(self, vocab, dim=64, n_classes=2):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.fc = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, n_classes))

    def forward(self, flat_ids, offsets):
        return self.fc(self.emb(flat_ids, offsets))


def collate(batch):
    ids = [b[0] for b in batch]
    offsets = torch.tensor([0] + [len(t) for t in ids[:-1]]).cumsum(0)
    labels = torch.tensor([b[1] for b in batch])
    return torch.cat(ids), offsets, labels


def batches(data, bs, shuffle):
    idx = list(range(len(data)))
    if shuffle:
        random.shuffle(idx)
    # same number of batches on every rank: shards are written with equal sizes
    for i in range(0, len(idx) - bs + 1, bs):
        yield collate([data[j] for j in idx[i:i + bs]])


model = DDP(BagOfWords(VOCAB_SIZE))
opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(
    opt, T_max=args.epochs * (len(train_examples) // args.batch_size))

# equal batch counts: agree on the smallest shard
n_local = torch.tensor([len(train_examples) // args.batch_size])
dist.all_reduce(n_local, op=dist.ReduceOp.MIN)
steps_per_epoch = int(n_local.item())
log(f"{steps_per_epoch} steps/epoch")

for epoch in range(args.epochs):
    model.train()
    tot, n = 0.0, 0
    for step, (ids, offs, y) in enumerate(batches(train_examples, args.batch_size, True)):
        if step >= steps_per_epoch:
            break
        loss = F.cross_entropy(model(ids, offs), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        tot += loss.item()
        n += 1

    model.eval()
    correct = torch.zeros(2)
    with torch.no_grad():
        for ids, offs, y in batches(val_examples, 64, False):
            pred = model.module(ids, offs).argmax(1)
            correct += torch.tensor([(pred == y).sum().item(), len(y)], dtype=torch.float)
    dist.all_reduce(correct)
    if rank == 0:
        log(f"epoch {epoch}: train loss {tot / max(n, 1):.4f} "
            f"val acc {correct[0] / correct[1]:.3f}")

if rank == 0:
    torch.save(model.module.state_dict(), "bow_sentiment.pt")
    log("saved bow_sentiment.pt")
dist.destroy_process_group()
