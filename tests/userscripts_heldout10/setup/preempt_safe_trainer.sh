#!/usr/bin/env bash
# Synthetic image-like classification data saved as a single .pt file.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data/shapes
"$PYTHON" - <<'PY'
import torch
g = torch.Generator().manual_seed(3)
n = 4096
y = torch.randint(0, 4, (n,), generator=g)
x = torch.randn(n, 1, 16, 16, generator=g) * 0.5
for c in range(4):          # put a class-dependent blob in one quadrant
    idx = (y == c).nonzero().squeeze(1)
    r, q = divmod(c, 2)
    x[idx, 0, r * 8:(r + 1) * 8, q * 8:(q + 1) * 8] += 1.0
torch.save({"x": x, "y": y}, "data/shapes/train.pt")
print("saved", tuple(x.shape))
PY
