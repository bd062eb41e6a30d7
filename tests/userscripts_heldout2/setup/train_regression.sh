#!/usr/bin/env bash
# Recreates data/sensors.pt (already-standardised sensor features -> energy target) for train_regression.py
set -euo pipefail
PYTHON="${PYTHON:-python3}"
mkdir -p data
"$PYTHON" - <<'PY'
import torch
g = torch.Generator().manual_seed(2024)
n, d = 2400, 12
x = torch.randn(n, d, generator=g)
w = torch.randn(d, generator=g)
y = torch.tanh(x @ w / 3) * 5 + 0.3 * x[:, 0] * x[:, 1] + 0.05 * torch.randn(n, generator=g)
# sensor 7 dropped out on one reading; the logger writes missing values as NaN
x[858, 7] = float("nan")
torch.save({"x": x, "y": y, "columns": [f"s{i}" for i in range(d)]}, "data/sensors.pt")
print("wrote data/sensors.pt", tuple(x.shape))
PY
