"""Listwise learning-to-rank (softmax over each query's candidates) with
hand-rolled gradient averaging; NDCG@10 computed on the coordinator."""
import logging

import numpy as np
import torch
import torch.nn as nn

from mlcore import World, world_session
from mlcore.bus import EventBus
from mlcore.loop import broadcast_parameters, shard_bounds, train_steps
from mlcore.metrics import Mean, gather_varlen

SETTINGS = dict(n_queries=205, cands_per_query=20, n_features=32, queries_per_batch=8, epochs=4, lr=3e-3, seed=7)
log = logging.getLogger("ranker")


def make_queries(s):
    rng = np.random.default_rng(s["seed"])
    w = rng.normal(size=s["n_features"])
    X = rng.normal(size=(s["n_queries"], s["cands_per_query"], s["n_features"])).astype(np.float32)
    rel = np.clip(np.round(X @ w / 3 + rng.normal(scale=0.5, size=X.shape[:2])), 0, 4).astype(np.float32)
    return torch.from_numpy(X), torch.from_numpy(rel)


def listwise_loss(model, batch):
    X, rel = batch
    scores = model(X).squeeze(-1)
    target = torch.softmax(rel, dim=-1)
    return -(target * torch.log_softmax(scores, dim=-1)).sum(-1).mean()


def ndcg_at_k(scores, rel, qid, k=10):
    out = []
    for q in np.unique(qid):
        s, r = scores[qid == q], rel[qid == q]
        gains = (2 ** r[np.argsort(-s)][:k] - 1) / np.log2(np.arange(2, min(k, len(r)) + 2))
        ideal = (2 ** np.sort(r)[::-1][:k] - 1) / np.log2(np.arange(2, min(k, len(r)) + 2))
        out.append(gains.sum() / max(ideal.sum(), 1e-9))
    return float(np.mean(out))


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    s = SETTINGS
    with world_session(timeout_s=30) as world:
        X, rel = make_queries(s)
        lo, hi = shard_bounds(s["n_queries"], world)
        X, rel, qid = X[lo:hi], rel[lo:hi], torch.arange(lo, hi)

        torch.manual_seed(s["seed"])
        model = nn.Sequential(nn.Linear(s["n_features"], 64), nn.ReLU(), nn.Linear(64, 1))
        broadcast_parameters(model)
        opt = torch.optim.Adam(model.parameters(), lr=s["lr"])
        bus = EventBus()
        running = Mean()
        bus.on("step_end", lambda loss, **_: running.update(loss))

        g = torch.Generator().manual_seed(s["seed"])
        for epoch in range(s["epochs"]):
            perm = torch.randperm(len(X), generator=g)
            nb = len(X) // s["queries_per_batch"]
            batches = ((X[idx], rel[idx]) for idx in perm[: nb * s["queries_per_batch"]].view(nb, -1))
            for _ in train_steps(model, opt, batches, listwise_loss, bus=bus):
                pass
            loss = running.compute()
            if world.coordinator:
                log.info("epoch %d listwise loss %.4f", epoch, loss)

        model.eval()
        with torch.no_grad():
            scores = model(X).squeeze(-1).reshape(-1)
        all_scores = gather_varlen(scores)
        all_rel = gather_varlen(rel.reshape(-1))
        all_qid = gather_varlen(qid.repeat_interleave(s["cands_per_query"]))
        if world.coordinator:
            log.info("NDCG@10 over %d queries: %.4f", len(torch.unique(all_qid)),
                     ndcg_at_k(all_scores.numpy(), all_rel.numpy(), all_qid.numpy()))


if __name__ == "__main__":
    main()
