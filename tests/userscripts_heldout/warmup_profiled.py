"""Small transformer encoder on a synthetic sequence-labelling task.

Linear warmup + cosine decay, DistributedSampler, and a one-off profile of one
rank's first epoch which is shipped to the team's trace collector.

    torchrun --nproc-per-node 2 warmup_profiled.py --epochs 4
"""
import argparse
import gzip
import json
import math
import os
import tempfile
import time
import urllib.error
import urllib.request
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

VOCAB, N_TAGS, SEQ = 512, 6, 32


class TaggingData(Dataset):
    def __init__(self, n, seed):
        g = torch.Generator().manual_seed(seed)
        self.tokens = torch.randint(2, VOCAB, (n, SEQ), generator=g)
        self.tags = self.tokens % N_TAGS

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i], self.tags[i]


class Tagger(nn.Module):
    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.zeros(SEQ, d))
        layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, batch_first=True, dropout=0.0)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d, N_TAGS)

    def forward(self, x):
        return self.out(self.enc(self.emb(x) + self.pos))


def warmup_cosine(optimizer, warmup_steps, total_steps, min_ratio=0.05):
    def factor(step):
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def upload_trace(path, url, run_id, rank, attempts=5, backoff=1.5):
    with open(path, "rb") as f:
        payload = gzip.compress(f.read())
    req = urllib.request.Request(
        url, data=payload, method="POST",
        headers={"Content-Encoding": "gzip", "Content-Type": "application/json",
                 "X-Run-Id": run_id, "X-Rank": str(rank)})
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                print(f"[rank {rank}] trace uploaded ({resp.status}, {len(payload)} bytes)", flush=True)
                return True
        except (urllib.error.URLError, OSError) as exc:
            if attempt == attempts - 1:
                print(f"[rank {rank}] giving up on trace upload: {exc}", flush=True)
                return False
            time.sleep(backoff * 2 ** attempt)


def run_epoch(model, loader, opt, sched):
    model.train()
    total = torch.zeros(2)
    for x, y in loader:
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, N_TAGS), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        total += torch.tensor([loss.item(), 1.0])
    return total


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--profile-rank", type=int, default=1,
                   help="rank whose first epoch is profiled (rank 0 is busy with logging)")
    p.add_argument("--trace-url", default=os.environ.get("TRACE_COLLECTOR_URL",
                                                         "http://127.0.0.1:4318/v1/traces"))
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "local")
    torch.manual_seed(0)

    ds = TaggingData(2048, seed=3)
    sampler = DistributedSampler(ds, shuffle=True, seed=11)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    model = DDP(Tagger())
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = warmup_cosine(opt, args.warmup_steps, args.epochs * len(loader))

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0 = time.time()
        if epoch == 0 and rank == args.profile_rank:
            with profile(activities=[ProfilerActivity.CPU], record_shapes=False) as prof:
                total = run_epoch(model, loader, opt, sched)
            trace = os.path.join(tempfile.gettempdir(), f"trace-{run_id}-rank{rank}.json")
            prof.export_chrome_trace(trace)
            upload_trace(trace, args.trace_url, run_id, rank)
        else:
            total = run_epoch(model, loader, opt, sched)
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch} loss {total[0] / total[1]:.4f} lr {sched.get_last_lr()[0]:.2e} "
                  f"({time.time() - t0:.1f}s)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
