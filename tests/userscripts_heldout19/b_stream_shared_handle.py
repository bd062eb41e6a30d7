"""Click-through model trained from JSONL event logs streamed per rank (IterableDataset + DataLoader workers)."""
import argparse
import json
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from b_common import arm_watchdog, fresh_run_dir, get_logger, init_distributed, seed_all, shutdown

NAME = "b_stream_shared_handle"
N_DENSE, N_SLOTS, HASH = 12, 4, 1000


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--files", type=int, default=4)
    p.add_argument("--events-per-file", type=int, default=3000)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=23)
    return p.parse_args()


def export_logs(root: Path, n_files: int, per_file: int, seed: int):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=N_DENSE)
    for f in range(n_files):
        with open(root / f"events-{f:04d}.jsonl", "w") as fh:
            for i in range(per_file):
                dense = rng.normal(size=N_DENSE)
                slots = rng.integers(0, HASH, size=N_SLOTS)
                p = 1 / (1 + math.exp(-(dense @ w + 0.5 * (slots[0] % 7 == 0))))
                ev = {"id": f"{f}-{i}", "ts": 1_700_000_000 + i, "dense": [round(v, 5) for v in dense],
                      "slots": slots.tolist(), "ua": "Mozilla/5.0 (X11; Linux x86_64)", "click": int(rng.random() < p)}
                fh.write(json.dumps(ev) + "\n")


class EventStream(IterableDataset):
    """Streams this rank's files; workers split the records round-robin."""

    def __init__(self, files, rank, world):
        self.files = sorted(files)[rank::world]
        self._handles = [open(p, "r") for p in self.files]
        self.num_events = 0
        for fh in self._handles:
            self.num_events += sum(1 for _ in fh)
            fh.seek(0)

    def __len__(self):
        return self.num_events

    def __iter__(self):
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info else (0, 1)
        for fh in self._handles:
            fh.seek(0)
            for i, line in enumerate(fh):
                if i % nw != wid:
                    continue
                ev = json.loads(line)
                yield (torch.tensor(ev["dense"], dtype=torch.float32), torch.tensor(ev["slots"]),
                       torch.tensor(float(ev["click"])))


class CTRModel(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.emb = nn.EmbeddingBag(HASH, dim, mode="sum")
        self.mlp = nn.Sequential(nn.Linear(N_DENSE + dim, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, dense, slots):
        return self.mlp(torch.cat([dense, self.emb(slots)], dim=1)).squeeze(-1)


def main():
    args = parse_args()
    arm_watchdog(180)
    rank, world = init_distributed()
    log = get_logger(NAME, rank)
    seed_all(args.seed)
    out = fresh_run_dir(NAME, rank)
    logs = out / "logs"
    if rank == 0:
        logs.mkdir()
        export_logs(logs, args.files, args.events_per_file, args.seed)
    dist.barrier()

    ds = EventStream(logs.glob("events-*.jsonl"), rank, world)
    steps = torch.tensor([len(ds) // args.batch_size])
    dist.all_reduce(steps, op=dist.ReduceOp.MIN)
    steps_per_epoch = int(steps)
    log.info("%d events in %d files, %d steps/epoch", len(ds), len(ds.files), steps_per_epoch)

    model = DDP(CTRModel())
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    t0 = time.time()
    for epoch in range(args.epochs):
        loader = DataLoader(ds, batch_size=args.batch_size, num_workers=args.workers, drop_last=True)
        stats = torch.zeros(3)
        for step, (dense, slots, click) in enumerate(loader):
            if step == steps_per_epoch:
                break
            logit = model(dense, slots)
            loss = F.binary_cross_entropy_with_logits(logit, click)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            stats += torch.tensor([loss.item() * len(click), ((logit > 0).float() == click).sum().item(), len(click)])
        dist.all_reduce(stats)
        log.info("epoch %d logloss %.4f acc %.4f (%.1fs)", epoch, stats[0] / stats[2], stats[1] / stats[2], time.time() - t0)
        if rank == 0:
            torch.save(model.module.state_dict(), out / "ctr.pt")
        dist.barrier()
    shutdown()


if __name__ == "__main__":
    main()
