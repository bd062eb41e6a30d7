#!/usr/bin/env python
"""Score the held-out reviews with the current sentiment classifier.

Each rank runs inference on its DistributedSampler shard and writes predictions/preds.rank<k>.jsonl,
then rank 0 merges the parts into predictions/submission.csv for the eval team.

    torchrun --nproc-per-node 2 infer_merge.py
"""
import argparse
import csv
import json
import os
import time
from collections import Counter
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = Path(__file__).resolve().parent

parser = argparse.ArgumentParser()
parser.add_argument("--data", default=str(HERE / "data" / "heldout.csv"))
parser.add_argument("--ckpt", default=str(HERE / "data" / "classifier.pt"))
parser.add_argument("--out-dir", default=str(HERE / "predictions"))
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--num-workers", type=int, default=0)
parser.add_argument("--pg-timeout", type=int, default=10)
args = parser.parse_args()

dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
rank = dist.get_rank()
world_size = dist.get_world_size()
torch.set_num_threads(1)


def log(msg):
    print(f"[rank {rank}] {time.strftime('%H:%M:%S')} {msg}", flush=True)


class HeldOutReviews(Dataset):
    """Feature rows exported by the feature pipeline, one review per row."""

    def __init__(self, path, n_features):
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        self.ids = [r["review_id"] for r in rows]
        self.x = torch.tensor([[float(r[f"f{i}"]) for i in range(n_features)] for r in rows])

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, idx):
        return idx, self.x[idx]


def build_model(n_features, n_classes):
    return nn.Sequential(nn.Linear(n_features, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, n_classes))


# ---------------------------------------------------------------- model + data
ckpt = torch.load(args.ckpt, map_location="cpu")
labels = ckpt["labels"]
model = build_model(ckpt["n_features"], len(labels))
model.load_state_dict(ckpt["state_dict"])
model.eval()

dataset = HeldOutReviews(args.data, ckpt["n_features"])
sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=False)
loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=args.num_workers)
log(f"{len(dataset)} reviews, {len(sampler)} on this rank, {len(loader)} batches")

out_dir = Path(args.out_dir)
out_dir.mkdir(parents=True, exist_ok=True)
part_path = out_dir / f"preds.rank{rank}.jsonl"

# ---------------------------------------------------------------- inference
t0 = time.time()
n_done = 0
with torch.no_grad(), open(part_path, "w") as part:
    for step, (idx, x) in enumerate(loader):
        logits = model(x)
        probs = logits.softmax(dim=-1)
        conf, pred = probs.max(dim=-1)
        for i, c, p_ in zip(idx.tolist(), conf.tolist(), pred.tolist()):
            part.write(json.dumps({"review_id": dataset.ids[i], "label": labels[p_],
                                   "confidence": round(c, 4)}) + "\n")
        n_done += len(idx)
        if step % 5 == 0:
            log(f"batch {step}/{len(loader)}")
log(f"wrote {n_done} predictions to {part_path} in {time.time() - t0:.1f}s")

# all parts must be on disk before rank 0 merges them
dist.barrier()

# ---------------------------------------------------------------- merge on rank 0
if rank == 0:
    merged = []
    for k in range(world_size):
        with open(out_dir / f"preds.rank{k}.jsonl") as f:
            merged.extend(json.loads(line) for line in f if line.strip())
    order = {rid: i for i, rid in enumerate(dataset.ids)}
    merged.sort(key=lambda r: order[r["review_id"]])
    assert len(merged) == len(dataset), f"expected {len(dataset)} predictions, got {len(merged)}"

    sub_path = out_dir / "submission.csv"
    with open(sub_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["review_id", "label", "confidence"])
        w.writeheader()
        w.writerows(merged)
    dist_counts = Counter(r["label"] for r in merged)
    mean_conf = sum(r["confidence"] for r in merged) / len(merged)
    log(f"submission: {sub_path} ({len(merged)} rows) label counts {dict(dist_counts)} mean conf {mean_conf:.3f}")
    for k in range(world_size):
        os.remove(out_dir / f"preds.rank{k}.jsonl")

# keep the other ranks alive until the submission is written
dist.barrier()
log("done")
dist.destroy_process_group()
