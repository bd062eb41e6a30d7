#!/usr/bin/env bash
# Generate the synthetic tabular regression data used by tabular_norm.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data" <<'PY'
import csv, random, sys, os
out = sys.argv[1]
random.seed(7)
n_feat = 24
w = [random.gauss(0, 1) for _ in range(n_feat)]
for split, n in (("train", 40000), ("valid", 4000)):
    with open(os.path.join(out, f"{split}.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow([f"f{i}" for i in range(n_feat)] + ["target"])
        for _ in range(n):
            x = [random.gauss(i * 0.5, 1 + i % 5) for i in range(n_feat)]
            y = sum(a * b for a, b in zip(w, x)) / n_feat + random.gauss(0, 0.1)
            wr.writerow([f"{v:.5f}" for v in x] + [f"{y:.5f}"])
print("wrote", out)
PY
