#!/usr/bin/env python
# Character-level GRU language model on the field-notes corpus.
#   bash setup/charlm.sh
#   torchrun --nproc-per-node 2 charlm.py
import argparse
import math
import os
import time
from collections import Counter, defaultdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))

p = argparse.ArgumentParser()
p.add_argument("--data", default=os.path.join(HERE, "data", "corpus"))
p.add_argument("--out", default=os.path.join(HERE, "out", "charlm"))
p.add_argument("--block", type=int, default=64)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--lr", type=float, default=3e-3)
p.add_argument("--emb", type=int, default=48)
p.add_argument("--hidden", type=int, default=128)
p.add_argument("--min-count", type=int, default=3)
p.add_argument("--no-lowercase", dest="lowercase", action="store_false")
p.add_argument("--log-every", type=int, default=10)
p.add_argument("--pg-timeout", type=int, default=10)
args = p.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1234)


def log(*a):
    if rank == 0:
        print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


class CharTokenizer:
    PAD, UNK = "<pad>", "<unk>"

    def __init__(self, counts, min_count=1, lowercase=True):
        self.lowercase = lowercase
        chars = sorted(c for c, n in counts.items() if n >= min_count)
        self.itos = [self.PAD, self.UNK] + chars
        # rare / unseen characters map to <unk> instead of raising KeyError
        self.stoi = defaultdict(lambda: 1, {c: i for i, c in enumerate(self.itos)})

    def __len__(self):
        return len(self.itos)

    def encode(self, text):
        if self.lowercase:
            text = text.lower()
        return [self.stoi[c] for c in text]

    def decode(self, ids):
        return "".join(self.itos[i] for i in ids if i > 1)


class Blocks(Dataset):
    def __init__(self, ids, block):
        self.ids = torch.tensor(ids, dtype=torch.long)
        self.block = block

    def __len__(self):
        return (len(self.ids) - 1) // self.block

    def __getitem__(self, i):
        s = i * self.block
        chunk = self.ids[s:s + self.block + 1]
        return chunk[:-1], chunk[1:]


class CharGRU(nn.Module):
    def __init__(self, vocab, emb, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb, padding_idx=0)
        self.rnn = nn.GRU(emb, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, h=None):
        out, h = self.rnn(self.emb(x), h)
        return self.head(out), h


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


train_files = sorted(os.path.join(args.data, f) for f in os.listdir(args.data) if f.startswith("notes_"))
val_file = os.path.join(args.data, "heldout.txt")

# The vocabulary has to be identical on every rank (embedding/head shapes and ids), so count
# characters once over the whole corpus on rank 0 and ship the tokenizer to the other ranks.
if rank == 0:
    counts = Counter()
    for f in train_files:
        t = read(f)
        counts.update(t.lower() if args.lowercase else t)
    tok = CharTokenizer(counts, args.min_count, args.lowercase)
    log(f"vocab: {len(tok)} symbols from {len(train_files)} files, {sum(counts.values())} chars")
    payload = [tok]
else:
    payload = [None]
dist.broadcast_object_list(payload, src=0)
tok = payload[0]

train_ids = []
for f in train_files:
    train_ids += tok.encode(read(f)) + [0]
train_ds = Blocks(train_ids, args.block)
val_ds = Blocks(tok.encode(read(val_file)), args.block)
sampler = DistributedSampler(train_ds, shuffle=True, seed=1234, drop_last=True)
train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
val_dl = DataLoader(val_ds, batch_size=args.batch_size,
                    sampler=DistributedSampler(val_ds, shuffle=False, drop_last=True))
log(f"{len(train_ds)} train blocks, {len(val_ds)} val blocks, {len(train_dl)} steps/epoch/rank")

model = DDP(CharGRU(len(tok), args.emb, args.hidden))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
total_steps = args.epochs * len(train_dl)
sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=total_steps, pct_start=0.1)

step, t0 = 0, time.time()
for epoch in range(args.epochs):
    sampler.set_epoch(epoch)
    model.train()
    run_loss = torch.zeros(2)
    for x, y in train_dl:
        logits, _ = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        step += 1
        run_loss += torch.tensor([loss.item(), 1.0])
        if step % args.log_every == 0:
            dist.all_reduce(run_loss)
            log(f"epoch {epoch} step {step}/{total_steps} loss {run_loss[0] / run_loss[1]:.3f} "
                f"lr {sched.get_last_lr()[0]:.2e} {(time.time() - t0) / step * 1000:.0f} ms/step")
            run_loss.zero_()

    model.eval()
    tot = torch.zeros(2)
    with torch.no_grad():
        for x, y in val_dl:
            logits, _ = model(x)
            tot[0] += F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1),
                                      ignore_index=0, reduction="sum").item()
            tot[1] += (y != 0).sum().item()
    dist.all_reduce(tot)
    val_loss = (tot[0] / tot[1]).item()
    log(f"epoch {epoch} val loss {val_loss:.3f} bpc {val_loss / math.log(2):.3f}")

if rank == 0:
    os.makedirs(args.out, exist_ok=True)
    torch.save({"model": model.module.state_dict(), "itos": tok.itos, "args": vars(args)},
               os.path.join(args.out, "charlm.pt"))
    # greedy-ish sample so we can eyeball the model
    net, ids, h = model.module, torch.tensor([[tok.stoi["t"]]]), None
    out = []
    with torch.no_grad():
        for _ in range(120):
            logits, h = net(ids, h)
            ids = torch.multinomial(F.softmax(logits[:, -1] / 0.8, -1), 1)
            out.append(ids.item())
    log("sample:", repr(tok.decode(out)))
dist.barrier()
dist.destroy_process_group()
