#!/usr/bin/env bash
# Writes the pre-sharded feature files produced by our preprocessing job (one CSV part per rank).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data/parts"
"$PYTHON" - "$HERE/data/parts" <<'PY'
import sys, os
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(7)
w = rng.normal(size=(16, 5))
# the preprocessing job writes parts of "about" equal size; the tail part is shorter
for part, n in enumerate([320, 290]):
    x = rng.normal(size=(n, 16)).astype(np.float32)
    y = (x @ w).argmax(1)
    with open(os.path.join(out, f"part-{part:05d}.csv"), "w") as f:
        f.write(",".join([f"f{i}" for i in range(16)] + ["label"]) + "\n")
        for row, lab in zip(x, y):
            f.write(",".join(f"{v:.5f}" for v in row) + f",{lab}\n")
PY
echo "wrote parts to $HERE/data/parts"
