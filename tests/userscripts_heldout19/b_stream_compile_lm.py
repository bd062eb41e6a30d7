"""Next-token model over gzipped JSONL shards, streamed per rank with DataLoader workers, torch.compile + DDP."""
import os

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", "/tmp/ho19_b_stream_compile_lm/inductor_cache")

import argparse
import gzip
import json
import math
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from b_common import arm_watchdog, get_logger, init_distributed, run_dir, seed_all, shutdown

NAME = "b_stream_compile_lm"
VOCAB = 64


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--records-per-shard", type=int, default=256)
    p.add_argument("--context", type=int, default=12)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--compile", type=int, default=1)
    p.add_argument("--seed", type=int, default=7)
    return p.parse_args()


def write_shards(root: Path, n_shards: int, per_shard: int, context: int, seed: int):
    """Synthetic corpus: each record is a window of a noisy arithmetic sequence mod VOCAB."""
    g = torch.Generator().manual_seed(seed)
    root.mkdir(parents=True, exist_ok=True)
    for s in range(n_shards):
        with gzip.open(root / f"train-{s:05d}.jsonl.gz", "wt") as fh:
            for _ in range(per_shard):
                start, step = torch.randint(0, VOCAB, (2,), generator=g).tolist()
                ids = [(start + i * (step % 7 + 1)) % VOCAB for i in range(context + 1)]
                fh.write(json.dumps({"ids": ids}) + "\n")


class ShardStream(IterableDataset):
    def __init__(self, files, rank, world):
        self.files = sorted(files)[rank::world]

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        for path in self.files:
            with gzip.open(path, "rt") as fh:
                for i, line in enumerate(fh):
                    if i % nw != wid:
                        continue
                    ids = torch.tensor(json.loads(line)["ids"])
                    yield ids[:-1], ids[-1]


class WindowLM(nn.Module):
    def __init__(self, context, dim=48):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, dim)
        self.mlp = nn.Sequential(nn.Linear(context * dim, 256), nn.GELU(), nn.Linear(256, VOCAB))

    def forward(self, x):
        return self.mlp(self.emb(x).flatten(1))


def count_records(files):
    n = 0
    for path in files:
        with gzip.open(path, "rt") as fh:
            n += sum(1 for _ in fh)
    return n


def main():
    args = parse_args()
    arm_watchdog(240)
    rank, world = init_distributed()
    log = get_logger(NAME, rank)
    seed_all(args.seed)
    out = run_dir(NAME)
    data = out / "shards"
    if rank == 0:
        shutil.rmtree(data, ignore_errors=True)
        write_shards(data, args.shards, args.records_per_shard, args.context, args.seed)
    dist.barrier()

    files = sorted(data.glob("train-*.jsonl.gz"))
    train_files, val_files = files[:-2], files[-2:]
    ds = ShardStream(train_files, rank, world)
    local = torch.tensor([count_records(ds.files) // args.batch_size])
    dist.all_reduce(local, op=dist.ReduceOp.MIN)
    steps_per_epoch = int(local.item())
    log.info("%d shards on this rank, %d steps per epoch", len(ds.files), steps_per_epoch)

    model = DDP(WindowLM(args.context))
    fwd = torch.compile(model) if args.compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total = args.epochs * steps_per_epoch
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 8) * 0.5 * (1 + math.cos(math.pi * s / total)))

    history = []
    t0 = time.time()
    for epoch in range(args.epochs):
        loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, drop_last=True)
        model.train()
        run_loss, seen = 0.0, 0
        for step, (x, y) in enumerate(loader):
            if step == steps_per_epoch:
                break
            loss = F.cross_entropy(fwd(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            run_loss += loss.item() * len(y)
            seen += len(y)

        model.eval()
        correct = n = 0
        with torch.no_grad():
            for x, y in DataLoader(ShardStream(val_files, rank, world), batch_size=64, num_workers=0):
                correct += (model.module(x).argmax(-1) == y).sum().item()
                n += len(y)
        per_rank = [None] * world
        dist.all_gather_object(per_rank, {"rank": rank, "train_loss": run_loss / max(seen, 1), "correct": correct, "n": n})
        acc = sum(r["correct"] for r in per_rank) / max(1, sum(r["n"] for r in per_rank))
        tl = sum(r["train_loss"] for r in per_rank) / world
        history.append({"epoch": epoch, "train_loss": round(tl, 4), "val_acc": round(acc, 4)})
        log.info("epoch %d train_loss %.4f val_acc %.4f (%.1fs)", epoch, tl, acc, time.time() - t0)

        if rank == 0:
            tmp = out / "last.pt.tmp"
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, tmp)
            os.replace(tmp, out / "last.pt")
        dist.barrier()

    if rank == 0:
        (out / "history.json").write_text(json.dumps(history, indent=1))
        log.info("done: %s", history[-1])
    shutdown()


if __name__ == "__main__":
    main()
