#!/usr/bin/env bash
# Builds data/train.csv and data/val.csv for auc_eval.py (fraud-detection-like tabular data).
# The validation export comes out of the labelling tool grouped by label (flagged cases first).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python}" - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
d = 16
w = rng.normal(size=d)

def make(n):
    x = rng.normal(size=(n, d)).astype(np.float32)
    logits = x @ w - 2.0
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(np.int64)
    return x, y

def write(path, x, y):
    cols = ",".join(f"f{i}" for i in range(d))
    with open(path, "w") as f:
        f.write(cols + ",label\n")
        for row, lab in zip(x, y):
            f.write(",".join(f"{v:.5f}" for v in row) + f",{lab}\n")

xt, yt = make(3000)
write("data/train.csv", xt, yt)
xv, yv = make(800)
order = np.argsort(-yv, kind="stable")      # grouped by label: flagged (1) first, then 0
write("data/val.csv", xv[order], yv[order])
print("train", len(yt), "pos", int(yt.sum()), "| val", len(yv), "pos", int(yv.sum()))
PY
