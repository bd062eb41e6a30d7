#!/usr/bin/env bash
# Builds the defect-detection data set under <script dir>/data.
#   train.npz          pooled history from both production lines
#   val_line_a.npz     last week of line A (labels from the manual inspection desk)
#   val_line_b.npz     last week of line B (labels from the automated gauge)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data" <<'PY'
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(1234)
n_feat = 20
w = rng.normal(size=n_feat)
w /= np.linalg.norm(w)

def draw(n, flip):
    x = rng.normal(size=(n, n_feat)).astype(np.float32)
    score = x @ w + 0.1 * rng.normal(size=n)
    y = (score > 0.3).astype(np.int64)
    noisy = rng.random(n) < flip
    y[noisy] = 1 - y[noisy]
    return x, y

x, y = draw(6000, flip=0.05)
np.savez(f"{out}/train.npz", x=x, y=y)
x, y = draw(600, flip=0.35)       # manual inspection desk disagrees with the gauge a lot
np.savez(f"{out}/val_line_a.npz", x=x, y=y)
x, y = draw(600, flip=0.0)
np.savez(f"{out}/val_line_b.npz", x=x, y=y)
print("wrote", out)
PY
