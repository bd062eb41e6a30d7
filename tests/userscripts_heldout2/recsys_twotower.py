"""Two-tower retrieval model (user/item embedding tables) with popularity-sampled negatives.

Per-shard item statistics (popularity + windowed co-occurrence) are cached next to each shard;
every rank builds/loads the stats of the shards it owns and the counts are summed across ranks.
Offline:  python recsys_twotower.py --build-stats data/shard-00000.pt
"""
import argparse
import glob
import json
import os
import sys
import time
from collections import Counter, defaultdict
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def build_shard_stats(shard_path, num_items, window):
    shard = torch.load(shard_path)
    by_user = defaultdict(list)
    for u, i, t in zip(shard["user"].tolist(), shard["item"].tolist(), shard["ts"].tolist()):
        by_user[u].append((t, i))
    pop, cooc = [0] * num_items, Counter()
    for events in by_user.values():
        events.sort()
        seq = [i for _, i in events]
        for pos, a in enumerate(seq):
            pop[a] += 1
            for b in seq[pos + 1:pos + 1 + window]:
                if a != b:
                    cooc[a * num_items + b if a < b else b * num_items + a] += 1
    dense = torch.zeros(num_items * num_items, dtype=torch.int32)
    dense[torch.tensor(list(cooc.keys()))] = torch.tensor(list(cooc.values()), dtype=torch.int32)
    dense = dense.view(num_items, num_items)
    return {"rows": len(shard["item"]), "window": window,
            "pop": torch.tensor(pop, dtype=torch.int64), "cooc": dense + dense.T}


def load_or_build_stats(shard_path, num_items, window, log):
    cache = shard_path.replace(".pt", ".stats.pt")
    if os.path.exists(cache):
        stats = torch.load(cache)
        if stats["window"] == window:
            log(f"loaded cached stats {cache}")
            return stats
    t0 = time.time()
    stats = build_shard_stats(shard_path, num_items, window)
    torch.save(stats, cache)
    log(f"built stats for {shard_path} in {time.time() - t0:.1f}s")
    return stats


class TwoTower(nn.Module):
    def __init__(self, num_users, num_items, dim):
        super().__init__()
        self.user_emb = nn.Embedding(num_users, dim)
        self.item_emb = nn.Embedding(num_items, dim)
        self.user_tower = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        self.item_tower = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(), nn.Linear(2 * dim, dim))
        nn.init.normal_(self.user_emb.weight, std=0.05)
        nn.init.normal_(self.item_emb.weight, std=0.05)

    def users(self, u):
        return F.normalize(self.user_tower(self.user_emb(u)), dim=-1)

    def items(self, i):
        return F.normalize(self.item_tower(self.item_emb(i)), dim=-1)

    def forward(self, u, pos, neg):
        uv, cand = self.users(u), self.items(torch.cat([pos, neg]))
        return uv @ cand.T / 0.07  # in-batch + sampled negatives, label = arange(B)


class Trainer:
    def __init__(self, args):
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        with open(os.path.join(args.data, "meta.json")) as f:
            self.meta = json.load(f)
        shards = sorted(glob.glob(os.path.join(args.data, "shard-*[0-9].pt")))
        n_items = self.meta["num_items"]
        pop, cooc = torch.zeros(n_items, dtype=torch.int64), torch.zeros(n_items, n_items, dtype=torch.int32)
        for path in shards[self.rank::self.world]:
            stats = load_or_build_stats(path, n_items, args.window, self.log_all)
            pop += stats["pop"]
            cooc += stats["cooc"]
        dist.all_reduce(pop)
        dist.all_reduce(cooc)
        self.neg_dist = pop.double().clamp(min=1) ** 0.75
        data = [torch.load(p) for p in shards]
        users = torch.cat([d["user"] for d in data])
        items = torch.cat([d["item"] for d in data])
        self.train_ds = TensorDataset(users[:-args.val_size], items[:-args.val_size])
        self.val_ds = TensorDataset(users[-args.val_size:], items[-args.val_size:])
        if self.rank == 0:
            os.makedirs("artifacts", exist_ok=True)
            torch.save(cooc.topk(10, dim=1).indices, "artifacts/related_items.pt")
        self.model = DDP(TwoTower(self.meta["num_users"], n_items, args.dim))
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.lr, weight_decay=1e-5)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: min(1.0, (s + 1) / 20))
        self.scaler = torch.amp.GradScaler("cpu")
        self.start_epoch = 0

    def log(self, msg):
        if self.rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def log_all(self, msg):
        print(f"[{time.strftime('%H:%M:%S')}][rank{self.rank}] {msg}", flush=True)

    def maybe_resume(self):
        if os.path.exists(self.args.ckpt):
            st = torch.load(self.args.ckpt, map_location="cpu")
            for name in ("opt", "sched", "scaler"):
                getattr(self, name).load_state_dict(st[name])
            self.model.module.load_state_dict(st["model"])
            self.start_epoch = st["epoch"] + 1
            self.log(f"resumed at epoch {self.start_epoch}")

    @torch.no_grad()
    def evaluate(self, loader, k=50):
        net = self.model.module.eval()
        all_items = net.items(torch.arange(self.meta["num_items"]))
        hits = []
        for u, i in loader:
            topk = (net.users(u) @ all_items.T).topk(k, dim=1).indices
            hits.append((topk == i[:, None]).any(1).float())
        hits = torch.cat(hits)
        gathered = [torch.empty_like(hits) for _ in range(self.world)]
        dist.all_gather(gathered, hits)
        self.model.train()
        return torch.cat(gathered).mean().item()

    def fit(self):
        a = self.args
        sampler = DistributedSampler(self.train_ds, shuffle=True, seed=17)
        loader = DataLoader(self.train_ds, batch_size=a.batch_size, sampler=sampler, drop_last=True)
        val_loader = DataLoader(self.val_ds, batch_size=1024,
                                sampler=DistributedSampler(self.val_ds, shuffle=False))
        self.maybe_resume()
        for epoch in range(self.start_epoch, a.epochs):
            sampler.set_epoch(epoch)
            for step, (u, pos) in enumerate(loader):
                if step == a.steps_per_epoch:
                    break
                neg = torch.multinomial(self.neg_dist, a.num_neg, replacement=True)
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    logits = self.model(u, pos, neg)
                    loss = F.cross_entropy(logits.float(), torch.arange(len(u)))
                self.opt.zero_grad(set_to_none=True)
                self.scaler.scale(loss).backward()
                self.scaler.step(self.opt)
                self.scaler.update()
                self.sched.step()
                if step % 20 == 0:
                    self.log(f"epoch {epoch} step {step} loss {loss.item():.4f}")
            recall = self.evaluate(val_loader)
            self.log(f"epoch {epoch} recall@50 {recall:.4f}")
            if self.rank == 0:
                torch.save({"model": self.model.module.state_dict(), "opt": self.opt.state_dict(),
                            "sched": self.sched.state_dict(), "scaler": self.scaler.state_dict(),
                            "epoch": epoch}, a.ckpt)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps-per-epoch", type=int, default=60)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--num-neg", type=int, default=256)
    p.add_argument("--dim", type=int, default=32); p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--window", type=int, default=128)
    p.add_argument("--val-size", type=int, default=4096)
    p.add_argument("--ckpt", default="twotower.ckpt")
    p.add_argument("--build-stats", default=None, help="offline: build the stats cache of one shard")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()
    if args.build_stats:
        meta = json.load(open(os.path.join(os.path.dirname(args.build_stats), "meta.json")))
        load_or_build_stats(args.build_stats, meta["num_items"], args.window, print)
        sys.exit(0)

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        torch.manual_seed(1234)
        Trainer(args).fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
