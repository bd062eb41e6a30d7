#!/usr/bin/env bash
# Writes the two pre-sharded parts of the embedding dump used by supcon_pretrain.py.
# part 0 = the annotated 2024 export, part 1 = the newer crawl (annotation in progress).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import random
random.seed(11)
DIM, N_CLASSES, ROWS = 32, 6, 1024
centers = [[random.gauss(0, 1.5) for _ in range(DIM)] for _ in range(N_CLASSES)]
for part, labelled_frac in [(0, 0.97), (1, 0.10)]:
    with open(f"data/shard-{part:05d}.csv", "w") as f:
        f.write(",".join([f"f{i}" for i in range(DIM)] + ["label"]) + "\n")
        for _ in range(ROWS):
            c = random.randrange(N_CLASSES)
            x = [m + random.gauss(0, 1.0) for m in centers[c]]
            label = c if random.random() < labelled_frac else -1
            f.write(",".join(f"{v:.4f}" for v in x) + f",{label}\n")
    print(f"wrote data/shard-{part:05d}.csv")
PY
