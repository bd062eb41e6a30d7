#!/usr/bin/env bash
# Synthetic 16x16 "digits": one blurred template per class plus noise, stored as uint8 .npy.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python}" - <<'PY'
import numpy as np
rng = np.random.default_rng(11)
templates = (rng.random((10, 16, 16)) > 0.6).astype(np.float32)
def make(n):
    y = rng.integers(0, 10, size=n)
    x = templates[y] * 200 + rng.normal(0, 40, size=(n, 16, 16))
    return np.clip(x, 0, 255).astype(np.uint8), y.astype(np.int64)
for split, n in (("train", 3000), ("val", 600)):
    x, y = make(n)
    np.save(f"data/{split}_x.npy", x)
    np.save(f"data/{split}_y.npy", y)
print("wrote data/{train,val}_{x,y}.npy")
PY
