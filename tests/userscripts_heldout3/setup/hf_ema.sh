#!/usr/bin/env bash
# Writes data/har/windows.npz: synthetic 3-axis accelerometer windows (64 samples) for 6 activities.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
mkdir -p data/har
"$PYTHON" - <<'PY'
import numpy as np
rng = np.random.default_rng(11)
def make(n):
    y = rng.integers(0, 6, n)
    t = np.arange(64) / 64.0
    freq = 1.0 + 0.8 * y[:, None, None]
    amp = 0.5 + 0.25 * (y[:, None, None] % 3)
    phase = rng.uniform(0, 2 * np.pi, (n, 3, 1))
    x = amp * np.sin(2 * np.pi * freq * t[None, None, :] + phase) + 0.4 * rng.standard_normal((n, 3, 64))
    x[:, 2] += 1.0  # gravity on z
    return x.astype(np.float32), y.astype(np.int64)
xtr, ytr = make(3000)
xev, yev = make(800)
np.savez("data/har/windows.npz", x_train=xtr, y_train=ytr, x_eval=xev, y_eval=yev)
print("windows.npz:", xtr.shape, xev.shape)
PY
