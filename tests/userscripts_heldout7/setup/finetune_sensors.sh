#!/usr/bin/env bash
# Synthetic accelerometer-window features: 12 features, 4 activity classes.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python}" - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
n, d, k = 4000, 12, 4
centers = rng.normal(0, 3, size=(k, d))
labels = rng.integers(0, k, size=n)
feats = centers[labels] + rng.normal(0, 1.5, size=(n, d)) * rng.uniform(0.5, 20, size=d) + 50
with open("data/sensors.csv", "w") as f:
    f.write(",".join([f"f{i}" for i in range(d)] + ["label"]) + "\n")
    for row, lab in zip(feats, labels):
        f.write(",".join(f"{v:.5f}" for v in row) + f",{lab}\n")
print("wrote data/sensors.csv")
PY
