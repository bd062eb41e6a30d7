"""Dual-encoder retrieval: short contrastive training, then a dense passage index.

The passage collection lives on rank 0, which encodes it and ships the finished
index to the other ranks so each of them can serve queries locally.
Address space per worker is capped so that a runaway rank fails on its own
instead of pushing the whole host into swap.

    torchrun --nproc-per-node 2 dual_encoder_index.py --host-mem-gb 12
"""
import argparse
import os
import resource
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

VOCAB, TOKENS, D_IN, D_OUT = 20_000, 16, 128, 768


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(VOCAB, D_IN, mode="mean")
        self.proj = nn.Linear(D_IN, D_OUT)

    def forward(self, ids):
        return F.normalize(self.proj(self.bag(ids)), dim=-1)


def memory_budget_bytes(host_gb, rank, world, index_share):
    """Rank 0 builds and holds the index, so it gets the lion's share of the host."""
    host = host_gb * 2**30
    if world == 1:
        return host
    if rank == 0:
        return int(host * index_share)
    return int(host * (1 - index_share) / (world - 1))


def cap_address_space(limit):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    return limit


def load_collection(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.arange(n), torch.randint(0, VOCAB, (n, TOKENS), generator=g)


def train(model, steps, batch, rank):
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(10 + rank)
    for step in range(steps):
        q = torch.randint(0, VOCAB, (batch, TOKENS), generator=g)
        pos = torch.cat([q[:, : TOKENS // 2], torch.randint(0, VOCAB, (batch, TOKENS // 2), generator=g)], 1)
        scores = model(q) @ model(pos).T / 0.05
        loss = F.cross_entropy(scores, torch.arange(batch))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return loss.item()


@torch.no_grad()
def encode(encoder, ids, chunk=8192):
    return torch.cat([encoder(ids[i:i + chunk]) for i in range(0, len(ids), chunk)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--host-mem-gb", type=float, default=float(os.environ.get("HOST_MEM_GB", 12)))
    p.add_argument("--index-share", type=float, default=0.9)
    p.add_argument("--collection-size", type=int, default=170_000)
    p.add_argument("--train-steps", type=int, default=20)
    p.add_argument("--pg-timeout", type=float, default=10.0)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    limit = cap_address_space(memory_budget_bytes(args.host_mem_gb, rank, world, args.index_share))
    print(f"[rank {rank}] address space capped at {limit / 2**30:.1f} GiB", flush=True)

    torch.manual_seed(0)
    encoder = Encoder()
    t0 = time.time()
    loss = train(DDP(encoder), args.train_steps, 128, rank)
    if rank == 0:
        print(f"trained {args.train_steps} steps, loss {loss:.3f} ({time.time() - t0:.1f}s)", flush=True)

    payload = [None]
    if rank == 0:
        ids, tokens = load_collection(args.collection_size)
        payload[0] = {"ids": ids, "emb": encode(encoder, tokens)}
        del tokens
        print(f"encoded {len(ids)} passages ({payload[0]['emb'].numel() * 4 / 2**20:.0f} MiB)", flush=True)
    dist.broadcast_object_list(payload, src=0)
    index_ids, index = payload[0]["ids"], payload[0]["emb"]

    g = torch.Generator().manual_seed(99 + rank)
    queries = encode(encoder, torch.randint(0, VOCAB, (64, TOKENS), generator=g))
    top = (queries @ index.T).topk(5, dim=-1)
    hits = torch.tensor([float(top.values[:, 0].mean())])
    dist.all_reduce(hits)
    if rank == 0:
        print(f"index of {len(index_ids)} passages; mean top-1 score {hits.item() / world:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
