#!/usr/bin/env bash
# Writes data/shapes.pt: 16x16 grayscale images of 4 noisy shape classes (train/val split).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python3}" - <<'PY'
import torch
g = torch.Generator().manual_seed(3)
def make(n):
    y = torch.randint(0, 4, (n,), generator=g)
    x = 0.3 * torch.randn(n, 1, 16, 16, generator=g)
    r = torch.arange(16)
    for i in range(n):
        c = int(y[i]); o = int(torch.randint(2, 6, (1,), generator=g))
        if c == 0: x[i, 0, o:o + 8, o + 3] += 1.0            # vertical bar
        elif c == 1: x[i, 0, o + 3, o:o + 8] += 1.0          # horizontal bar
        elif c == 2: x[i, 0, r[o:o + 8], r[o:o + 8]] += 1.0  # diagonal
        else: x[i, 0, o:o + 6, o:o + 6] += 0.6               # blob
    return x, y
xtr, ytr = make(4000)
xva, yva = make(800)
torch.save({"train": (xtr, ytr), "val": (xva, yva)}, "data/shapes.pt")
print("wrote data/shapes.pt", tuple(xtr.shape), tuple(xva.shape))
PY
