"""Offline retrieval eval: embed the document corpus on all ranks, then score the query set against it.

    torchrun --nproc-per-node 2 embed_retrieval.py --query_batch_size 64 --top_k 10
"""
import argparse
import dataclasses
import json
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class EvalArguments:
    n_docs: int = field(default=2000, metadata={"help": "corpus size"})
    n_queries: int = field(default=129, metadata={"help": "size of the labelled query set"})
    vocab_size: int = 5000
    doc_len: int = 48
    query_len: int = 12
    embed_dim: int = 128
    encode_batch_size: int = 128
    query_batch_size: int = 64
    top_k: int = 10
    seed: int = 42
    output_dir: str = field(default_factory=lambda: os.path.join(os.path.dirname(os.path.abspath(__file__)), "retrieval_out"))
    pg_timeout: int = 10


def parse_args() -> EvalArguments:
    parser = argparse.ArgumentParser()
    for f in dataclasses.fields(EvalArguments):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        parser.add_argument(f"--{f.name}", type=type(default), default=default, help=f.metadata.get("help"))
    return EvalArguments(**vars(parser.parse_args()))


class Corpus(Dataset):
    def __init__(self, tokens):
        self.tokens = tokens

    def __len__(self):
        return self.tokens.shape[0]

    def __getitem__(self, i):
        return self.tokens[i]


class BagEncoder(nn.Module):
    """Mean-of-embeddings encoder with a projection, as trained by the dual-encoder job."""

    def __init__(self, vocab_size, dim):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.proj = nn.Linear(dim, dim)

    def forward(self, tokens):
        return F.normalize(self.proj(self.emb(tokens)), dim=-1)


def build_benchmark(a: EvalArguments):
    g = torch.Generator().manual_seed(a.seed)
    docs = torch.randint(0, a.vocab_size, (a.n_docs, a.doc_len), generator=g)
    positives = torch.randint(0, a.n_docs, (a.n_queries,), generator=g)
    # a query is a handful of words from its relevant document
    cols = torch.stack([torch.randperm(a.doc_len, generator=g)[: a.query_len] for _ in range(a.n_queries)])
    queries = torch.gather(docs[positives], 1, cols)
    return docs, queries, positives


@torch.no_grad()
def embed_corpus(model, docs, a, rank, world):
    ds = Corpus(docs)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(ds, batch_size=a.encode_batch_size, sampler=sampler)
    local = torch.cat([model(batch) for batch in loader])
    gathered = [torch.empty_like(local) for _ in range(world)]
    dist.all_gather(gathered, local)
    # sampler hands out indices rank, rank+world, ...; interleave back and drop the padding
    full = torch.stack(gathered, dim=1).reshape(-1, local.shape[-1])[: len(ds)]
    return full


@torch.no_grad()
def search(model, doc_emb, queries, positives, a, rank, world):
    results = []
    n = queries.shape[0]
    for start in range(0, n, a.query_batch_size):
        q_tok = queries[start:start + a.query_batch_size]
        q_ids = torch.arange(start, start + q_tok.shape[0])
        # split the query batch over the ranks, every rank scores its part against the full corpus
        my_tok = q_tok.chunk(world)[rank]
        my_ids = q_ids.chunk(world)[rank]
        scores = model(my_tok) @ doc_emb.T
        top_scores, top_idx = scores.topk(a.top_k, dim=-1)
        mine = [(qid, idx.tolist(), sc.tolist()) for qid, idx, sc in zip(my_ids.tolist(), top_idx, top_scores)]
        batch_results = [None] * world
        dist.all_gather_object(batch_results, mine)
        for part in batch_results:
            results.extend(part)
    results.sort(key=lambda r: r[0])
    return results


def metrics(results, positives, k):
    hits, rr = 0, 0.0
    for qid, idx, _ in results:
        pos = positives[qid].item()
        if pos in idx[:k]:
            hits += 1
            rr += 1.0 / (idx.index(pos) + 1)
    return {f"recall@{k}": hits / len(results), f"mrr@{k}": rr / len(results), "n_queries": len(results)}


def main():
    a = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=a.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)  # same encoder weights on every rank

    model = BagEncoder(a.vocab_size, a.embed_dim).eval()
    docs, queries, positives = build_benchmark(a)

    t0 = time.time()
    doc_emb = embed_corpus(model, docs, a, rank, world)
    if rank == 0:
        print(f"embedded {doc_emb.shape[0]} docs -> {tuple(doc_emb.shape)} in {time.time() - t0:.1f}s", flush=True)

    results = search(model, doc_emb, queries, positives, a, rank, world)
    if rank == 0:
        m = metrics(results, positives, a.top_k)
        os.makedirs(a.output_dir, exist_ok=True)
        with open(os.path.join(a.output_dir, "metrics.json"), "w") as f:
            json.dump(m, f, indent=2)
        with open(os.path.join(a.output_dir, "rankings.jsonl"), "w") as f:
            for qid, idx, sc in results:
                f.write(json.dumps({"qid": qid, "docs": idx, "scores": [round(s, 4) for s in sc]}) + "\n")
        print(json.dumps(m), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
