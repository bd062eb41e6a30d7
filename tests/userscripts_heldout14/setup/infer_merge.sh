#!/usr/bin/env bash
# Builds the held-out set and a "trained" classifier checkpoint for infer_merge.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python}"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data" <<'PY'
import csv, sys, torch, torch.nn as nn
out = sys.argv[1]
g = torch.Generator().manual_seed(1234)
n, d = 1001, 16          # whatever the export job produced this week
x = torch.randn(n, d, generator=g)
with open(f"{out}/heldout.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["review_id"] + [f"f{i}" for i in range(d)])
    for i in range(n):
        w.writerow([f"r{i:05d}"] + [f"{v:.5f}" for v in x[i].tolist()])
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(d, 64), nn.ReLU(), nn.Dropout(0.1), nn.Linear(64, 3))
torch.save({"state_dict": model.state_dict(), "labels": ["negative", "neutral", "positive"],
            "n_features": d}, f"{out}/classifier.pt")
print(f"wrote {n} rows and classifier.pt to {out}")
PY
