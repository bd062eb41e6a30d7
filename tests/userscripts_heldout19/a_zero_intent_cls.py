"""Intent classification (bag of n-grams) with DDP + ZeroRedundancyOptimizer.
Optimizer state is sharded across ranks; a full checkpoint is written every epoch."""
import argparse
import gc
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from a_common import get_logger, setup, teardown

NAME = "zero_intent_cls"
INTENTS = {
    "weather": ["will it rain {d}", "weather in {c} {d}", "how cold is it in {c}", "is it sunny {d}"],
    "alarm": ["wake me up at {t}", "set an alarm for {t}", "cancel my {t} alarm", "snooze the alarm"],
    "music": ["play some {g}", "put on {g} music", "skip this song", "turn the {g} up"],
    "travel": ["book a flight to {c}", "train tickets to {c} {d}", "hotels in {c}", "how far is {c}"],
    "food": ["order {f} for dinner", "find {f} near me", "is the {f} place open {d}", "recipe for {f}"],
}
FILL = {"d": ["today", "tomorrow", "tonight", "on friday"], "c": ["paris", "oslo", "lima", "cairo", "perth"],
        "t": ["six", "seven thirty", "noon", "9 am"], "g": ["jazz", "rock", "lofi", "techno"],
        "f": ["pizza", "sushi", "tacos", "ramen"]}


def synth(n, seed):
    rnd = random.Random(seed)
    labels = sorted(INTENTS)
    rows = []
    for _ in range(n):
        y = rnd.randrange(len(labels))
        tmpl = rnd.choice(INTENTS[labels[y]])
        rows.append((tmpl.format(**{k: rnd.choice(v) for k, v in FILL.items()}), y))
    return rows, labels


def ngrams(text, n_buckets):
    toks = text.split()
    feats = toks + [a + "_" + b for a, b in zip(toks, toks[1:])]
    return [hash_str(f) % n_buckets for f in feats]


def hash_str(s):
    h = 2166136261
    for ch in s.encode():
        h = ((h ^ ch) * 16777619) & 0xFFFFFFFF
    return h


class IntentData(Dataset):
    def __init__(self, rows, n_buckets):
        self.items = [(torch.tensor(ngrams(t, n_buckets)), y) for t, y in rows]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def collate(batch):
    ids = torch.cat([b[0] for b in batch])
    offsets = torch.tensor([0] + [len(b[0]) for b in batch[:-1]]).cumsum(0)
    return ids, offsets, torch.tensor([b[1] for b in batch])


class BagClassifier(nn.Module):
    def __init__(self, n_buckets, dim, n_cls):
        super().__init__()
        self.emb = nn.EmbeddingBag(n_buckets, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Dropout(0.1), nn.Linear(dim, n_cls))

    def forward(self, ids, offsets):
        return self.mlp(self.emb(ids, offsets))


def save_checkpoint(path, model, opt, epoch, rank, ckpt_rank):
    opt.consolidate_state_dict()
    if rank == ckpt_rank:
        tmp = path + ".tmp"
        torch.save({"epoch": epoch, "model": model.module.state_dict(), "optim": opt.state_dict()}, tmp)
        os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--buckets", type=int, default=4096)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--ckpt-rank", type=int, default=-1,
                    help="rank that writes checkpoints (-1: last rank, the one next to the shared volume)")
    args = ap.parse_args()
    rank, world, out = setup(NAME, watchdog_s=150, seed=3)
    log = get_logger(NAME, rank)
    ckpt_rank = args.ckpt_rank if args.ckpt_rank >= 0 else world - 1

    rows, labels = synth(3000, seed=5)
    train = IntentData(rows[:2600], args.buckets)
    val = IntentData(rows[2600:], args.buckets)
    sampler = DistributedSampler(train, shuffle=True, seed=1, drop_last=True)
    tr = DataLoader(train, args.batch_size, sampler=sampler, collate_fn=collate, drop_last=True)
    va = DataLoader(val, 100, sampler=DistributedSampler(val, shuffle=False), collate_fn=collate)

    model = DDP(BagClassifier(args.buckets, args.dim, len(labels)))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                  lr=args.lr, weight_decay=0.01)
    if rank == 0:
        log.info("%d intents, %d train rows, checkpoints by rank %d", len(labels), len(train), ckpt_rank)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        t0, run = time.time(), torch.zeros(2)
        for ids, offs, y in tr:
            loss = F.cross_entropy(model(ids, offs), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            run += torch.tensor([loss.item() * len(y), len(y)])
        model.eval()
        correct = torch.zeros(2)
        with torch.no_grad():
            for ids, offs, y in va:
                correct += torch.tensor([(model(ids, offs).argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(run)
        dist.all_reduce(correct)
        if rank == 0:
            log.info("epoch %d loss %.4f val_acc %.3f (%.1fs)", epoch, run[0] / run[1], correct[0] / correct[1],
                     time.time() - t0)
        save_checkpoint(os.path.join(out, "last.pt"), model, opt, epoch, rank, ckpt_rank)
        log.info("checkpoint epoch %d done", epoch)

    del model, opt
    gc.collect()
    teardown()


if __name__ == "__main__":
    main()
