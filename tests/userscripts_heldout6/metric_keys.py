# train_tagger.py -- sentence-level topic classifier on data/corpus.jsonl
# run: torchrun --nproc-per-node 2 metric_keys.py
import argparse
import json
import os
import time
from collections import defaultdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/corpus.jsonl")
parser.add_argument("--max-len", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=2e-3)
parser.add_argument("--log-every", type=int, default=20)
parser.add_argument("--vocab-size", type=int, default=5000)
parser.add_argument("--num-topics", type=int, default=6)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world = dist.get_world_size()
torch.manual_seed(0)


def log(*a):
    if rank == 0:
        print(time.strftime("%H:%M:%S"), *a, flush=True)


# ---------------------------------------------------------------- data
with open(args.data) as f:
    records = [json.loads(line) for line in f]
# contiguous shards, one per rank (file is pre-shuffled by the export job)
per_rank = len(records) // world
shard = records[rank * per_rank:(rank + 1) * per_rank]
log(f"{len(records)} records, {per_rank} per rank")


def encode(rec, max_len):
    ids = [hash_tok(t) for t in rec["text"].split()]
    truncated = len(ids) > max_len
    ids = ids[:max_len]
    mask = [1] * len(ids) + [0] * (max_len - len(ids))
    ids = ids + [0] * (max_len - len(ids))
    return ids, mask, truncated


def hash_tok(tok):
    # stable across processes (python's hash() is salted per process)
    h = 0
    for ch in tok:
        h = (h * 131 + ord(ch)) % (args.vocab_size - 1)
    return h + 1


def batches(shard, epoch):
    g = torch.Generator().manual_seed(epoch)
    order = torch.randperm(len(shard), generator=g).tolist()
    for s in range(0, len(order) - args.batch_size + 1, args.batch_size):
        recs = [shard[i] for i in order[s:s + args.batch_size]]
        enc = [encode(r, args.max_len) for r in recs]
        ids = torch.tensor([e[0] for e in enc])
        mask = torch.tensor([e[1] for e in enc], dtype=torch.float)
        n_trunc = sum(e[2] for e in enc)
        y = torch.tensor([r["topic"] for r in recs])
        yield ids, mask, y, n_trunc


# ---------------------------------------------------------------- model
class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(args.vocab_size, 96, padding_idx=0)
        self.proj = nn.Sequential(nn.Linear(96, 128), nn.BatchNorm1d(128), nn.ReLU(),
                                  nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU())
        self.out = nn.Linear(128, args.num_topics)

    def forward(self, ids, mask):
        e = self.emb(ids) * mask.unsqueeze(-1)
        pooled = e.sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.out(self.proj(pooled))


model = DDP(Tagger())
opt = torch.optim.Adam(model.parameters(), lr=args.lr)
sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.epochs * (per_rank // args.batch_size))


def reduce_metrics(metrics):
    """Average every logged metric over all ranks."""
    out = {}
    for name in sorted(metrics):
        t = torch.tensor(float(sum(metrics[name])) / max(len(metrics[name]), 1))
        dist.all_reduce(t)
        out[name] = t.item() / world
    return out


# ---------------------------------------------------------------- train
step = 0
for epoch in range(args.epochs):
    model.train()
    metrics = defaultdict(list)
    t0 = time.time()
    for ids, mask, y, n_trunc in batches(shard, epoch):
        logits = model(ids, mask)
        loss = F.cross_entropy(logits, y)
        opt.zero_grad()
        loss.backward()
        gnorm = nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        opt.step()
        sched.step()
        step += 1

        metrics["loss"].append(loss.item())
        metrics["acc"].append((logits.argmax(1) == y).float().mean().item())
        metrics["grad_norm"].append(gnorm.item())
        if n_trunc:
            metrics["truncated_frac"].append(n_trunc / len(y))

        if step % args.log_every == 0:
            m = reduce_metrics(metrics)
            log(f"ep {epoch} step {step} " + " ".join(f"{k}={v:.4f}" for k, v in m.items()))
            metrics = defaultdict(list)

    log(f"epoch {epoch} finished in {time.time() - t0:.1f}s")

if rank == 0:
    os.makedirs("checkpoints", exist_ok=True)
    torch.save(model.module.state_dict(), "checkpoints/tagger.pt")
dist.barrier()
dist.destroy_process_group()
