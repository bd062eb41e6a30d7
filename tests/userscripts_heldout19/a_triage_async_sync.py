"""Triage model (3-way urgency + optional severity score) trained data-parallel without DDP:
gradients are all-reduced asynchronously from per-parameter hooks while backward is still running,
and waited for right before the optimizer step. Each rank reads its own export part."""
import argparse
import gc
import json
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset

from a_common import get_logger, setup, teardown

NAME = "triage_async_sync"
N_FEAT = 20


def export_parts(folder, n_per_part=1200, seed=4):
    """Write the two export parts (one per clinic system) the way the ETL job does."""
    rng = np.random.default_rng(seed)
    w = rng.normal(size=(N_FEAT, 3))
    coverage = {"part-0": 0.35, "part-1": 0.10}
    for part, cov in coverage.items():
        X = rng.normal(size=(n_per_part, N_FEAT)).astype(np.float32)
        urg = (X @ w + rng.normal(scale=0.5, size=(n_per_part, 3))).argmax(1)
        sev = np.where(rng.random(n_per_part) < cov, np.clip(X[:, :4].sum(1) * 0.8 + 5, 0, 10), np.nan)
        with open(os.path.join(folder, f"{part}.jsonl"), "w") as f:
            for x, u, s in zip(X, urg, sev):
                f.write(json.dumps({"x": x.round(4).tolist(), "urgency": int(u),
                                    "severity": None if np.isnan(s) else round(float(s), 3)}) + "\n")


class TriageRows(Dataset):
    def __init__(self, path):
        with open(path) as f:
            rows = [json.loads(l) for l in f]
        self.x = torch.tensor([r["x"] for r in rows])
        self.u = torch.tensor([r["urgency"] for r in rows])
        self.s = torch.tensor([float("nan") if r["severity"] is None else r["severity"] for r in rows])

    def __len__(self):
        return len(self.u)

    def __getitem__(self, i):
        return self.x[i], self.u[i], self.s[i]


class TriageNet(nn.Module):
    def __init__(self, hidden=96):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(N_FEAT, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.urgency = nn.Linear(hidden, 3)
        self.severity = nn.Sequential(nn.Linear(hidden, 32), nn.GELU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.trunk(x)


class OverlappedAllReduce:
    """Start an async all_reduce for each gradient as soon as autograd has accumulated it."""

    def __init__(self, model):
        self.world = dist.get_world_size()
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.pending = []
        for p in self.params:
            dist.broadcast(p.data, src=0)
            p.register_post_accumulate_grad_hook(self._launch)

    def _launch(self, p):
        self.pending.append(dist.all_reduce(p.grad, async_op=True))

    def wait(self):
        for work in self.pending:
            work.wait()
        self.pending.clear()
        for p in self.params:
            if p.grad is not None:
                p.grad.div_(self.world)


def compute_loss(model, x, u, s, sev_weight):
    h = model(x)
    loss = F.cross_entropy(model.urgency(h), u)
    has_sev = ~torch.isnan(s)
    if has_sev.any():
        pred = model.severity(h[has_sev]).squeeze(-1)
        loss = loss + sev_weight * F.smooth_l1_loss(pred, s[has_sev])
    return loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--sev-weight", type=float, default=0.5)
    ap.add_argument("--log-every", type=int, default=10)
    args = ap.parse_args()
    rank, world, out = setup(NAME, watchdog_s=150, seed=0)
    log = get_logger(NAME, rank)

    if rank == 0:
        export_parts(out)
    dist.barrier()
    ds = TriageRows(os.path.join(out, f"part-{rank}.jsonl"))
    loader = DataLoader(ds, args.batch_size, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(100 + rank))
    log.info("part-%d: %d rows, %d with severity", rank, len(ds), int((~torch.isnan(ds.s)).sum()))

    model = TriageNet()
    sync = OverlappedAllReduce(model)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)

    step = 0
    for epoch in range(args.epochs):
        t0, tot = time.time(), torch.zeros(2, dtype=torch.float64)
        for x, u, s in loader:
            opt.zero_grad(set_to_none=True)
            loss = compute_loss(model, x, u, s, args.sev_weight)
            loss.backward()
            sync.wait()
            opt.step()
            tot += torch.tensor([loss.item(), 1.0], dtype=torch.float64)
            step += 1
            if step % args.log_every == 0:
                log.info("step %d local loss %.4f", step, tot[0] / tot[1])
        work = dist.all_reduce(tot, async_op=True)
        ckpt = os.path.join(out, f"triage_rank{rank}.pt")
        if rank == 0:
            torch.save({"model": model.state_dict(), "step": step}, ckpt)
        work.wait()
        if rank == 0:
            log.info("epoch %d mean loss %.4f steps %d (%.1fs)", epoch, tot[0] / tot[1], step, time.time() - t0)

    del model, opt, sync
    gc.collect()
    teardown()


if __name__ == "__main__":
    main()
