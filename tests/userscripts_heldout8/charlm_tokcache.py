"""Tiny character-level LM on data/corpus.txt.

    torchrun --nproc-per-node 2 charlm_tokcache.py

Tokenization is done once by rank 0 and cached next to the data so the other
ranks (and later runs) don't redo it.
"""
import argparse
import math
import os
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

parser = argparse.ArgumentParser()
parser.add_argument("--data", default="data/corpus.txt")
parser.add_argument("--cache-dir", default="data/cache")
parser.add_argument("--seq-len", type=int, default=64)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--d-model", type=int, default=64)
parser.add_argument("--log-every", type=int, default=20)
parser.add_argument("--pg-timeout", type=int, default=10)
parser.add_argument("--seed", type=int, default=1234)
args = parser.parse_args()

# ---------------------------------------------------------------- distributed
dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.manual_seed(args.seed)


def log(*a):
    if rank == 0:
        print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


# ---------------------------------------------------------------- tokenizer
# vocab is fixed (printable ascii) so every rank agrees on it without talking
VOCAB = ["<pad>", "<unk>"] + [chr(c) for c in range(32, 127)] + ["\n"]
STOI = {ch: i for i, ch in enumerate(VOCAB)}


def encode(text):
    return np.array([STOI.get(ch, 1) for ch in text], dtype=np.int32)


os.makedirs(args.cache_dir, exist_ok=True)
cache_path = os.path.join(args.cache_dir, f"corpus_chars_v{len(VOCAB)}.bin")

if rank == 0:
    if os.path.exists(cache_path):
        log(f"loading cached tokens from {cache_path}")
        ids = np.load(cache_path)
    else:
        t0 = time.time()
        with open(args.data) as f:
            text = f.read()
        ids = encode(text)
        np.save(cache_path, ids)
        log(f"tokenized {len(text):,} chars in {time.time() - t0:.2f}s -> {cache_path}")
# everybody waits for rank 0 to finish writing the cache
dist.barrier()
if rank != 0:
    ids = np.load(cache_path)

ids = torch.from_numpy(ids.astype(np.int64))
n_val = len(ids) // 20
train_ids, val_ids = ids[:-n_val], ids[-n_val:]
log(f"train tokens {len(train_ids):,}  val tokens {len(val_ids):,}")


class Chunks(Dataset):
    def __init__(self, ids, seq_len):
        self.ids = ids
        self.seq_len = seq_len

    def __len__(self):
        return (len(self.ids) - 1) // self.seq_len

    def __getitem__(self, i):
        s = i * self.seq_len
        x = self.ids[s:s + self.seq_len]
        y = self.ids[s + 1:s + self.seq_len + 1]
        return x, y


train_ds = Chunks(train_ids, args.seq_len)
val_ds = Chunks(val_ids, args.seq_len)
train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed, drop_last=True)
val_sampler = DistributedSampler(val_ds, shuffle=False)
train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, drop_last=True)
val_dl = DataLoader(val_ds, batch_size=args.batch_size, sampler=val_sampler)


# ---------------------------------------------------------------- model
class CharGRU(nn.Module):
    def __init__(self, vocab, d):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.rnn = nn.GRU(d, d, batch_first=True)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.head(self.norm(h))


model = DDP(CharGRU(len(VOCAB), args.d_model))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
total_steps = args.epochs * len(train_dl)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total_steps)


@torch.no_grad()
def evaluate():
    model.eval()
    tot = torch.zeros(2)
    for x, y in val_dl:
        logits = model(x)
        tot[0] += F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum")
        tot[1] += y.numel()
    dist.all_reduce(tot)
    model.train()
    return (tot[0] / tot[1]).item()


# ---------------------------------------------------------------- train
step = 0
t_start = time.time()
for epoch in range(args.epochs):
    train_sampler.set_epoch(epoch)
    for x, y in train_dl:
        logits = model(x)
        loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        if step % args.log_every == 0:
            log(f"ep {epoch} step {step}/{total_steps} loss {loss.item():.3f} "
                f"lr {sched.get_last_lr()[0]:.2e}")
    val = evaluate()
    log(f"epoch {epoch} val loss {val:.3f} ppl {math.exp(val):.2f} ({time.time() - t_start:.1f}s)")

if rank == 0:
    torch.save(model.module.state_dict(), "charlm_final.pt")
    log("saved charlm_final.pt")
dist.barrier()
dist.destroy_process_group()
