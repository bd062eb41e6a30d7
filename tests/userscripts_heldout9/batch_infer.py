# Offline batch inference: classify every request in requests.jsonl, sharded over ranks,
# predictions gathered on rank 0 and written to predictions.jsonl.
#   bash setup/batch_infer.sh && torchrun --nproc-per-node 2 batch_infer.py
import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
LABELS = ["billing", "bug", "feature_request", "account", "other"]


class TicketClassifier(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.tok = nn.Embedding(cfg["vocab_size"], cfg["dim"], padding_idx=0)
        self.pos = nn.Embedding(cfg["max_len"], cfg["dim"])
        layer = nn.TransformerEncoderLayer(cfg["dim"], cfg["heads"], cfg["dim"] * 4, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False)
        self.head = nn.Linear(cfg["dim"], cfg["n_labels"])

    def forward(self, ids, mask):
        pos = torch.arange(ids.size(1), device=ids.device).unsqueeze(0)
        h = self.tok(ids) + self.pos(pos)
        h = self.encoder(h, src_key_padding_mask=~mask)
        h = (h * mask.unsqueeze(-1)).sum(1) / mask.sum(1, keepdim=True)
        return self.head(h)


class Requests(Dataset):
    def __init__(self, path, vocab):
        with open(path) as f:
            self.rows = [json.loads(line) for line in f if line.strip()]
        self.vocab = vocab

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        ids = [self.vocab.get(w, 1) for w in row["text"].lower().split()]
        return i, torch.tensor(ids, dtype=torch.long)


def summarize(merged, threshold=0.35):
    """Confidence histogram plus the requests a human should look at."""
    edges = [0.0, 0.2, 0.35, 0.5, 0.75, 1.01]
    hist = [0] * (len(edges) - 1)
    review = []
    for r in merged:
        for k in range(len(hist)):
            if edges[k] <= r["confidence"] < edges[k + 1]:
                hist[k] += 1
                break
        if r["confidence"] < threshold:
            review.append(r["id"])
    return {"hist": dict(zip([f"<{e}" for e in edges[1:]], hist)), "needs_review": review}


def collate(batch):
    idx = torch.tensor([b[0] for b in batch])
    lens = [len(b[1]) for b in batch]
    ids = torch.zeros(len(batch), max(lens), dtype=torch.long)
    for j, (_, t) in enumerate(batch):
        ids[j, :len(t)] = t
    mask = ids != 0
    return idx, ids, mask


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=os.path.join(HERE, "infer_data"))
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--out", default=os.path.join(HERE, "infer_data", "predictions.jsonl"))
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.set_num_threads(1)

    cfg = json.load(open(os.path.join(args.data_dir, "config.json")))
    vocab = json.load(open(os.path.join(args.data_dir, "vocab.json")))
    model = TicketClassifier(cfg)
    model.load_state_dict(torch.load(os.path.join(args.data_dir, "model.pt"), map_location="cpu"))
    model.eval()

    ds = Requests(os.path.join(args.data_dir, "requests.jsonl"), vocab)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank, shuffle=False)
    loader = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, collate_fn=collate)
    print(f"[rank {rank}] {len(sampler)} requests, {len(loader)} batches", flush=True)

    t0 = time.time()
    results = []
    with torch.inference_mode():
        for b, (idx, ids, mask) in enumerate(loader):
            probs = model(ids, mask).softmax(-1)
            conf, pred = probs.max(-1)
            for i, p, c in zip(idx.tolist(), pred.tolist(), conf.tolist()):
                results.append({"id": ds.rows[i]["id"], "label": LABELS[p], "confidence": round(c, 4)})
            if b % 5 == 0:
                print(f"[rank {rank}] batch {b}/{len(loader)} ({time.time() - t0:.1f}s)", flush=True)

    gathered = [None] * world if rank == 0 else None
    dist.gather_object(results, gathered, dst=0)
    if rank == 0:
        seen, merged = set(), []
        for part in gathered:
            for r in part:
                if r["id"] not in seen:          # DistributedSampler padding repeats a few requests
                    seen.add(r["id"])
                    merged.append(r)
        merged.sort(key=lambda r: r["id"])
        with open(args.out, "w") as f:
            for r in merged:
                f.write(json.dumps(r) + "\n")
        counts = {l: sum(r["label"] == l for r in merged) for l in LABELS}
        summary = summarize(merged)
        with open(os.path.splitext(args.out)[0] + "_summary.json", "w") as f:
            json.dump(summary, f, indent=2)
        print(f"confidence histogram {summary['hist']}, {len(summary['needs_review'])} for review", flush=True)
        print(f"wrote {len(merged)} predictions to {args.out}: {counts} in {time.time() - t0:.1f}s", flush=True)
    dist.barrier()
    dist.destroy_process_group()
