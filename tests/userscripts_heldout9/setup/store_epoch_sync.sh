#!/bin/bash
# Synthetic housing-style regression table.
set -e
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
n, d = 4096, 12
x = rng.normal(size=(n, d)).astype(np.float32)
w = rng.normal(size=d)
y = (x @ w + 0.5 * np.sin(3 * x[:, 0]) + 0.1 * rng.normal(size=n)).astype(np.float32)
np.savez("data/housing.npz", x=x, y=y)
print("housing.npz", x.shape)
PY
