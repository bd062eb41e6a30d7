#!/usr/bin/env bash
# Export the tabular churn dataset as CSV part files (as our nightly export job does).
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python}"
mkdir -p "$HERE/data/tabular"
"$PYTHON" - "$HERE/data/tabular" <<'PY'
import sys, os
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(7)
n_parts, rows = 6, 1200
W = rng.normal(size=(12, 4))
for part in range(n_parts):
    X = rng.normal(size=(rows, 12)).round(4)
    y = (X @ W + 0.3 * rng.normal(size=(rows, 4))).argmax(1)
    path = os.path.join(out, f"part-{part:05d}.csv")
    header = ",".join([f"f{i}" for i in range(12)] + ["label"])
    with open(path, "w") as f:
        f.write(header + "\n")
        for xi, yi in zip(X, y):
            # part 3 was re-exported from the warehouse after the label column picked up
            # a NULL upstream; the export tool wrote that column as DOUBLE ("2.0")
            lab = f"{float(yi):.1f}" if part == 3 else str(int(yi))
            f.write(",".join(f"{v:.4f}" for v in xi) + "," + lab + "\n")
print("wrote", n_parts, "parts to", out)
PY
