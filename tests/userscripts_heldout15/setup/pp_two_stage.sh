#!/usr/bin/env bash
# Make the tabular training set for pp_two_stage.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data/sensors.npz" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
n, d, k = 1000, 24, 5
centers = rng.normal(0, 2.0, size=(k, d))
y = rng.integers(0, k, size=n)
X = centers[y] + rng.normal(0, 1.0, size=(n, d))
np.savez(sys.argv[1], X=X.astype(np.float32), y=y.astype(np.int64))
print("wrote", sys.argv[1], X.shape)
PY
