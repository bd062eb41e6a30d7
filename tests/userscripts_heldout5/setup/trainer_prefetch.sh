#!/usr/bin/env bash
# Export a tabular regression dataset to CSV for trainer_prefetch.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data" <<'PY'
import csv, os, random, sys
out = sys.argv[1]
rng = random.Random(7)
n_feat = 16
w = [rng.uniform(-1, 1) for _ in range(n_feat)]
with open(os.path.join(out, "sensors.csv"), "w", newline="") as f:
    wr = csv.writer(f)
    wr.writerow([f"s{i}" for i in range(n_feat)] + ["target"])
    for r in range(2400):
        x = [round(rng.gauss(0, 1), 5) for _ in range(n_feat)]
        y = sum(a * b for a, b in zip(w, x)) + rng.gauss(0, 0.1)
        row = x + [round(y, 5)]
        if r == 1237:
            # sensor s9 dropped out for this reading; the exporter just omitted the cell
            row = x[:9] + x[10:] + [round(y, 5)]
        wr.writerow(row)
print("wrote sensors.csv")
PY
