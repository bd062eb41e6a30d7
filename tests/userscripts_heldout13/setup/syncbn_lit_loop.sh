#!/usr/bin/env bash
# synthetic 6-channel sensor windows, 5 activity classes
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
def make(n):
    y = rng.integers(0, 5, size=n)
    t = np.linspace(0, 1, 128, dtype=np.float32)
    freq = (y + 1)[:, None, None] * 2.0
    x = np.sin(2 * np.pi * freq * t[None, None, :] + rng.uniform(0, 6.28, size=(n, 6, 1)))
    x = x + 0.3 * rng.standard_normal((n, 6, 128))
    return x.astype(np.float32), y.astype(np.int64)
for name, n in (("train", 4096), ("val", 512)):
    x, y = make(n)
    np.savez(f"data/{name}.npz", x=x, y=y)
    print(name, x.shape, np.bincount(y))
PY
