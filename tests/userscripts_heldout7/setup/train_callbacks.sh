#!/usr/bin/env bash
# Builds pre-shuffled, pre-sharded jsonl shards (one per rank) under data/callbacks/.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data/callbacks
$PYTHON - <<'PY'
import json, random
random.seed(7)
D, C = 32, 5
centers = [[random.gauss(0, 1) for _ in range(D)] for _ in range(C)]
for shard in range(2):
    with open(f"data/callbacks/shard-{shard:05d}.jsonl", "w") as f:
        for i in range(640):
            y = random.randrange(C)
            x = [c + random.gauss(0, 0.8) for c in centers[y]]
            # shard 1 was cut from the annotation queue: a block of rows not labelled yet
            if shard == 1 and 48 <= i < 96:
                y = -1
            f.write(json.dumps({"id": f"{shard}-{i}", "x": [round(v, 4) for v in x], "label": y}) + "\n")
PY
echo "wrote data/callbacks"
