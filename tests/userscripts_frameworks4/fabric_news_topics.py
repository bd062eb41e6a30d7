"""Topic classifier for wire-service news on hashed character-trigram features.

Lightning Fabric, DDP on CPU (gloo).  Featurising the corpus is the slow part,
so it is done once, by rank 0, into an .npz cache that every rank then reads.

    torchrun --nproc-per-node 2 fabric_news_topics.py
"""
import argparse
import random
import time
import zlib
from collections import Counter
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from lightning.fabric import Fabric
from lightning.fabric.strategies import DDPStrategy
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from plfab_common import arm_hang_watchdog, fresh_outdir, say

NAME = "fabric_news_topics"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(90)

TOPICS = {
    "sports": "match goal coach season league striker injury title cup final referee transfer".split(),
    "markets": "shares index rally bond yield inflation earnings investors stocks rate merger".split(),
    "science": "study researchers cells climate telescope species genome experiment data lab vaccine".split(),
    "politics": "minister vote parliament election party bill coalition campaign senate policy treaty".split(),
}
LABELS = sorted(TOPICS)
COMMON = "the a of in on and to for with after said new year people today report week officials".split()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--n-docs", type=int, default=96000)
    p.add_argument("--hash-dim", type=int, default=512)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--cache", default=str(OUT / "features.npz"))
    return p.parse_args()


def synth_article(rng):
    topic = rng.choice(LABELS)
    n = rng.randint(60, 120)
    words = [rng.choice(TOPICS[topic]) if rng.random() < 0.25 else rng.choice(COMMON) for _ in range(n)]
    return " ".join(words), LABELS.index(topic)


def featurize(text, dim):
    """Hashed character trigrams plus word unigrams and bigrams."""
    counts = Counter()
    words = text.split()
    for w in words:
        w = f"<{w}>"
        for k in range(len(w) - 2):
            counts[zlib.crc32(w[k:k + 3].encode()) % dim] += 1
    for a, b in zip(["<s>"] + words, words + ["</s>"]):
        counts[zlib.crc32(f"w:{b}".encode()) % dim] += 1
        counts[zlib.crc32(f"b:{a}_{b}".encode()) % dim] += 1
    return counts


def build_feature_cache(args):
    t0 = time.time()
    rng = random.Random(0)
    x = np.zeros((args.n_docs, args.hash_dim), np.float16)
    y = np.zeros(args.n_docs, np.int64)
    df = np.zeros(args.hash_dim, np.float64)
    for i in range(args.n_docs):
        text, y[i] = synth_article(rng)
        counts = featurize(text, args.hash_dim)
        idx = np.fromiter(counts.keys(), np.int64)
        x[i, idx] = np.log1p(np.fromiter(counts.values(), np.float64))
        df[idx] += 1
        if i and i % 24000 == 0:
            say(f"featurised {i}/{args.n_docs} articles ({time.time() - t0:.0f}s)")
    idf = np.log((1 + args.n_docs) / (1 + df)) + 1
    x = x * idf.astype(np.float16)
    x /= np.linalg.norm(x.astype(np.float32), axis=1, keepdims=True).astype(np.float16) + 1e-3
    np.savez(args.cache, x=x, y=y, idf=idf)
    say(f"feature cache written to {args.cache} in {time.time() - t0:.0f}s")


def main():
    args = parse_args()
    t0 = time.time()
    fabric = Fabric(accelerator="cpu", devices=2,
                    strategy=DDPStrategy(timeout=timedelta(seconds=30), process_group_backend="gloo"))
    if fabric.is_global_zero and not OUT.joinpath("features.npz").exists():
        build_feature_cache(args)
    fabric.launch()
    fabric.barrier()
    fabric.seed_everything(11)

    data = np.load(args.cache)
    x, y = torch.from_numpy(data["x"].astype(np.float32)), torch.from_numpy(data["y"])
    n_val = len(y) // 10
    train_dl = DataLoader(TensorDataset(x[n_val:], y[n_val:]), batch_size=args.batch_size, shuffle=True)
    val_dl = DataLoader(TensorDataset(x[:n_val], y[:n_val]), batch_size=1024)
    model = nn.Sequential(nn.Linear(args.hash_dim, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, len(LABELS)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    model, optimizer = fabric.setup(model, optimizer)
    train_dl, val_dl = fabric.setup_dataloaders(train_dl, val_dl)

    for epoch in range(args.epochs):
        model.train()
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            fabric.backward(loss)
            optimizer.step()
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for xb, yb in val_dl:
                correct += (model(xb).argmax(-1) == yb).sum()
                total += len(yb)
        acc = fabric.all_reduce(torch.stack([correct, torch.tensor(total)]).float(), reduce_op="sum")
        fabric.print(f"epoch {epoch}: loss {loss.item():.3f}  val acc {(acc[0] / acc[1]).item():.3f}")

    fabric.save(OUT / "topic_mlp.ckpt", {"model": model, "labels": LABELS})
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"finished in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
