"""Tiny causal LM pretraining on a sharded jsonl stream.

torchrun --nproc-per-node 2 stream_lm.py
"""
import argparse
import json
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

p = argparse.ArgumentParser()
p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--lr", type=float, default=3e-3)
p.add_argument("--warmup", type=int, default=5)
p.add_argument("--workers", type=int, default=2)
p.add_argument("--d-model", type=int, default=64)
p.add_argument("--pg-timeout", type=int, default=10)
p.add_argument("--log-every", type=int, default=10)
args = p.parse_args()

dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
torch.set_num_threads(1)


def log(*a):
    if rank == 0:
        print(f"[{time.strftime('%H:%M:%S')}]", *a, flush=True)


with open(os.path.join(args.data, "manifest.json")) as f:
    manifest = json.load(f)


class ShardStream(IterableDataset):
    """Streams jsonl shards; shards are split across ranks, then across loader workers."""

    def __init__(self, root, shard_files, rank, world):
        self.root = root
        self.files = sorted(shard_files)[rank::world]

    def __iter__(self):
        info = get_worker_info()
        files = self.files
        if info is not None:
            files = files[info.id::info.num_workers]
        for name in files:
            with open(os.path.join(self.root, "shards", name)) as fh:
                for line in fh:
                    ids = json.loads(line)["ids"]
                    yield torch.tensor(ids, dtype=torch.long)


ds = ShardStream(args.data, [s["file"] for s in manifest["shards"]], rank, world)
loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, drop_last=True)

# The stream has no len(); derive the epoch length from the manifest instead
global_batch = args.batch_size * world
steps_per_epoch = manifest["num_records"] // global_batch
total_steps = steps_per_epoch * args.epochs
log(f"world={world} records={manifest['num_records']} steps/epoch={steps_per_epoch} total={total_steps}")


class Block(nn.Module):
    def __init__(self, d, heads=4):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab, d, n_layers=2, max_len=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(n_layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        T = idx.size(1)
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        x = self.tok(idx) + self.pos(torch.arange(T))
        for b in self.blocks:
            x = b(x, mask)
        return self.head(self.ln(x))


model = DDP(TinyLM(manifest["vocab_size"], args.d_model))
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)


def lr_at(step):
    if step < args.warmup:
        return (step + 1) / args.warmup
    prog = (step - args.warmup) / max(1, total_steps - args.warmup)
    return 0.5 * (1 + math.cos(math.pi * prog))


sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)

global_step = 0
t0 = time.time()
for epoch in range(args.epochs):
    model.train()
    data_iter = iter(loader)
    running = 0.0
    for step in range(steps_per_epoch):
        tokens = next(data_iter)
        inp, tgt = tokens[:, :-1], tokens[:, 1:]
        logits = model(inp)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        global_step += 1
        running += loss.item()
        if global_step % args.log_every == 0:
            avg = torch.tensor([running / args.log_every])
            dist.all_reduce(avg)
            log(f"epoch {epoch} step {global_step}/{total_steps} loss {avg.item() / world:.4f} "
                f"lr {sched.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")
            running = 0.0
    log(f"epoch {epoch} done")

if rank == 0:
    os.makedirs(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt"), exist_ok=True)
    torch.save(model.module.state_dict(),
               os.path.join(os.path.dirname(os.path.abspath(__file__)), "ckpt", "tinylm.pt"))
dist.barrier()
log("finished")
dist.destroy_process_group()
