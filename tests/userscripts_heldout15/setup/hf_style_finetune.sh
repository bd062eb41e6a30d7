#!/usr/bin/env bash
# Writes data/train.csv next to hf_style_finetune.py (synthetic 3-class tabular data).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import csv, random
rng = random.Random(0)
with open("data/train.csv", "w", newline="") as f:
    w = csv.writer(f)
    w.writerow([f"f{i}" for i in range(16)] + ["label"])
    for _ in range(3000):
        label = rng.randrange(3)
        w.writerow([round(rng.gauss(label * 0.5 if i < 4 else 0.0, 1.0), 4) for i in range(16)] + [label])
PY
