"""Ticket-routing classifier on hashed bag-of-words features.

Rank 0 tokenises the raw tickets into a node-local scratch cache (one partition per rank), shares the
vocabulary/label names with broadcast_object_list, hands out partitions with scatter_object_list and
collects per-rank eval summaries with all_gather_object. The scratch cache is removed at the end.
"""
import argparse
import json
import os
import random
import shutil
import time
from collections import Counter
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from b_common import arm_watchdog, env_rank, fresh_run_dir, get_logger, init_distributed, run_dir, seed_all, shutdown

NAME = "b_objsync_features"
TOPICS = {
    "billing": "invoice charge refund card payment overcharged receipt plan",
    "login": "password reset account locked sign two factor code email",
    "shipping": "package delivery tracking courier late address parcel lost",
    "bug": "crash error screen app freeze update broken button",
}
FILLER = "please help thanks hi hello urgent today again still customer team".split()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--tickets", type=int, default=4000)
    p.add_argument("--min-count", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--cache-wait-s", type=float, default=600.0)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


def synth_tickets(n, seed):
    rnd = random.Random(seed)
    names = sorted(TOPICS)
    for _ in range(n):
        topic = rnd.choice(names)
        words = rnd.sample(TOPICS[topic].split(), 3) + rnd.sample(FILLER, 3) + [rnd.choice(TOPICS[rnd.choice(names)].split())]
        rnd.shuffle(words)
        yield " ".join(words), topic


def wait_for_marker(marker: Path, timeout_s: float, log):
    t0 = time.time()
    while not marker.exists():
        if time.time() - t0 > timeout_s:
            raise TimeoutError(f"{marker} did not appear within {timeout_s:.0f}s")
        time.sleep(0.5)
    log.info("feature cache ready after %.1fs", time.time() - t0)


def build_feature_cache(scratch: Path, args, world: int, log):
    """Tokenise once, write one tensor partition per rank plus meta.json, then the done-marker."""
    scratch.mkdir(parents=True, exist_ok=True)
    rows = list(synth_tickets(args.tickets, args.seed))
    counts = Counter(w for text, _ in rows for w in text.split())
    vocab = {w: i for i, w in enumerate(sorted(w for w, c in counts.items() if c >= args.min_count))}
    labels = sorted(TOPICS)
    x = torch.zeros(len(rows), len(vocab))
    y = torch.tensor([labels.index(t) for _, t in rows])
    for i, (text, _) in enumerate(rows):
        for w in text.split():
            if w in vocab:
                x[i, vocab[w]] += 1.0
    n_val = len(rows) // 5
    torch.save((x[:n_val], y[:n_val]), scratch / "val.pt")
    parts = []
    for r in range(world):
        path = scratch / f"part-{r:03d}.pt"
        torch.save((x[n_val + r :: world], y[n_val + r :: world]), path)
        parts.append(str(path))
    (scratch / "meta.json").write_text(json.dumps({"vocab": vocab, "labels": labels, "parts": parts}))
    (scratch / "features.done").touch()
    log.info("feature cache: %d tickets, vocab %d, %d partitions", len(rows), len(vocab), world)


def main():
    args = parse_args()
    arm_watchdog(150)
    rank = env_rank()
    log = get_logger(NAME, rank)
    scratch = run_dir(NAME) / "scratch"
    if rank != 0:
        wait_for_marker(scratch / "features.done", args.cache_wait_s, log)
    rank, world = init_distributed()
    seed_all(args.seed)
    try:
        out = run_dir(NAME)
        if rank == 0:
            out.mkdir(parents=True, exist_ok=True)
            build_feature_cache(scratch, args, world, log)
        dist.barrier()

        meta = [json.loads((scratch / "meta.json").read_text()) if rank == 0 else None]
        dist.broadcast_object_list(meta, src=0)
        vocab, labels = meta[0]["vocab"], meta[0]["labels"]
        mine = [None]
        dist.scatter_object_list(mine, meta[0]["parts"] if rank == 0 else None, src=0)
        x, y = torch.load(mine[0])
        xv, yv = torch.load(scratch / "val.pt")
        log.info("partition %s: %d rows, vocab %d, labels %s", Path(mine[0]).name, len(y), len(vocab), labels)

        model = DDP(nn.Sequential(nn.Linear(len(vocab), 32), nn.ReLU(), nn.Linear(32, len(labels))))
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        loader = DataLoader(TensorDataset(x, y), batch_size=args.batch_size, shuffle=True, drop_last=True)
        for epoch in range(args.epochs):
            tot = 0.0
            for xb, yb in loader:
                loss = F.cross_entropy(model(xb), yb)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                tot += loss.item()
            with torch.no_grad():
                shard = slice(rank, None, world)
                pred = model.module(xv[shard]).argmax(-1)
            summary = {"rank": rank, "loss": tot / len(loader), "correct": int((pred == yv[shard]).sum()), "n": len(pred)}
            gathered = [None] * world
            dist.all_gather_object(gathered, summary)
            acc = sum(s["correct"] for s in gathered) / sum(s["n"] for s in gathered)
            if rank == 0:
                log.info("epoch %d loss %s val_acc %.4f", epoch, [round(s["loss"], 4) for s in gathered], acc)
        if rank == 0:
            torch.save({"model": model.module.state_dict(), "vocab": vocab, "labels": labels}, out / "router.pt")
        shutdown()
    finally:
        if rank == 0:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
