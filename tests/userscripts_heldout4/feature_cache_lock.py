"""Sentiment classifier on hashed n-gram features (EmbeddingBag), DDP on CPU.

    bash setup/feature_cache_lock.sh
    torchrun --nproc-per-node 2 feature_cache_lock.py --num-train-epochs 4

Tokenised features are cached under cache_dir so re-runs (and the other ranks) skip tokenisation.
"""
import dataclasses
import fcntl
import hashlib
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainingArguments:
    train_file: str = "data/reviews_train.tsv"
    eval_file: str = "data/reviews_val.tsv"
    cache_dir: str = "cache"
    output_dir: str = "outputs/sentiment"
    num_train_epochs: int = 4
    per_device_train_batch_size: int = 32
    learning_rate: float = 5e-3
    weight_decay: float = 0.0
    warmup_ratio: float = 0.1
    hash_buckets: int = 1 << 15
    max_length: int = 96
    ngram: int = 2
    embed_dim: int = 64
    logging_steps: int = 25
    early_stopping_patience: int = 2
    pg_timeout: int = field(default=10, metadata={"help": "process group timeout (s)"})
    seed: int = 42


def parse_args(cls, argv):
    import argparse
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(cls):
        names = [f"--{f.name}", f"--{f.name.replace('_', '-')}"]
        p.add_argument(*dict.fromkeys(names), type=type(f.default), default=f.default,
                       help=f.metadata.get("help"))
    return cls(**vars(p.parse_args(argv)))


class FileLock:
    """Minimal inter-process lock (the `filelock` package isn't on the cluster image)."""

    def __init__(self, path):
        self.path = path
        self.fd = None

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def featurize(path, args):
    ids, labels = [], []
    with open(path) as f:
        for line in f:
            label, text = line.rstrip("\n").split("\t", 1)
            toks = text.lower().split()
            grams = toks + [" ".join(toks[i:i + args.ngram]) for i in range(len(toks) - args.ngram + 1)]
            row = [1 + int(hashlib.md5(g.encode()).hexdigest()[:8], 16) % (args.hash_buckets - 1)
                   for g in grams][: args.max_length]
            ids.append(row + [0] * (args.max_length - len(row)))
            labels.append(int(label))
    return {"input_ids": torch.tensor(ids), "labels": torch.tensor(labels)}


def load_features(path, args, rank, world_size):
    key = hashlib.sha1(f"{os.path.abspath(path)}:{os.path.getmtime(path)}:{args.hash_buckets}:"
                       f"{args.max_length}:{args.ngram}".encode()).hexdigest()[:16]
    cache_file = os.path.join(args.cache_dir, f"{os.path.basename(path)}.{key}.pt")
    with FileLock(os.path.join(args.cache_dir, ".features.lock")):
        if not os.path.exists(cache_file):
            print(f"[rank {rank}] tokenising {path} -> {cache_file}", flush=True)
            feats = featurize(path, args)
            torch.save(feats, cache_file + ".tmp")
            os.replace(cache_file + ".tmp", cache_file)
        feats = torch.load(cache_file)
        # make sure no rank picked up a stale cache from an older tokeniser version
        digest = torch.tensor([feats["labels"].numel(), int(feats["input_ids"].sum())])
        digests = [torch.zeros_like(digest) for _ in range(world_size)]
        dist.all_gather(digests, digest)
        if any(not torch.equal(d, digest) for d in digests):
            raise RuntimeError(f"feature cache mismatch across ranks: {[d.tolist() for d in digests]}")
    return TensorDataset(feats["input_ids"], feats["labels"])


class BagClassifier(nn.Module):
    def __init__(self, buckets, dim, n_labels=2):
        super().__init__()
        self.emb = nn.EmbeddingBag(buckets, dim, mode="mean", padding_idx=0)
        self.head = nn.Sequential(nn.Linear(dim, dim), nn.Tanh(), nn.Linear(dim, n_labels))

    def forward(self, input_ids):
        return self.head(self.emb(input_ids))


class PrinterCallback:
    def on_log(self, state, logs):
        if state["rank"] == 0:
            print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in logs.items()),
                  flush=True)


class EarlyStoppingCallback:
    def __init__(self, patience):
        self.patience, self.best, self.bad = patience, None, 0

    def on_evaluate(self, state, metrics):
        if self.best is None or metrics["eval_acc"] > self.best:
            self.best, self.bad = metrics["eval_acc"], 0
        else:
            self.bad += 1
            state["should_stop"] = self.bad >= self.patience


def evaluate(model, loader):
    model.eval()
    s = torch.zeros(3)
    with torch.no_grad():
        for x, y in loader:
            logits = model(x)
            s += torch.stack([F.cross_entropy(logits, y, reduction="sum"), (logits.argmax(-1) == y).sum(),
                              torch.tensor(float(y.numel()))])
    dist.all_reduce(s)
    model.train()
    return {"eval_loss": (s[0] / s[2]).item(), "eval_acc": (s[1] / s[2]).item()}


def main():
    args = parse_args(TrainingArguments, sys.argv[1:])
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train_ds = load_features(args.train_file, args, rank, world_size)
    eval_ds = load_features(args.eval_file, args, rank, world_size)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    train_dl = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=sampler, drop_last=True)
    eval_dl = DataLoader(eval_ds, batch_size=128, sampler=DistributedSampler(eval_ds, shuffle=False))

    model = DDP(BagClassifier(args.hash_buckets, args.embed_dim))
    opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
    total = args.num_train_epochs * len(train_dl)
    warmup = int(args.warmup_ratio * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / max(1, warmup), max(0.0, (total - s) / max(1, total - warmup))))
    callbacks = [PrinterCallback(), EarlyStoppingCallback(args.early_stopping_patience)]
    state = {"rank": rank, "global_step": 0, "epoch": 0, "should_stop": False}

    t0 = time.time()
    for epoch in range(args.num_train_epochs):
        state["epoch"] = epoch
        sampler.set_epoch(epoch)
        for x, y in train_dl:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            state["global_step"] += 1
            if state["global_step"] % args.logging_steps == 0:
                for cb in callbacks:
                    if hasattr(cb, "on_log"):
                        cb.on_log(state, {"step": state["global_step"], "loss": loss.item(),
                                          "lr": sched.get_last_lr()[0], "elapsed": time.time() - t0})
        metrics = evaluate(model, eval_dl)
        for cb in callbacks:
            if hasattr(cb, "on_evaluate"):
                cb.on_evaluate(state, metrics)
            if hasattr(cb, "on_log"):
                cb.on_log(state, {"epoch": epoch, **metrics})
        if state["should_stop"]:
            break

    if rank == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        torch.save(model.module.state_dict(), os.path.join(args.output_dir, "pytorch_model.bin"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
