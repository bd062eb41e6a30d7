#!/usr/bin/env bash
# Builds a toy sequence-classification corpus with a difficulty score per example.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data/curriculum
"$PYTHON" - <<'PY'
import json, random
random.seed(7)
rows = []
for i in range(6000):
    length = random.randint(4, 48)
    toks = [random.randint(1, 499) for _ in range(length)]
    label = int(sum(t % 7 for t in toks) / length > 3.0)
    rows.append({"id": i, "tokens": toks, "label": label, "difficulty": round(length / 48, 4)})
with open("data/curriculum/train.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print("wrote", len(rows), "examples")
PY
