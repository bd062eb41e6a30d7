#!/usr/bin/env bash
# Builds a small tokenised corpus (jsonl, one sequence per line) for tokbudget_lm.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data/corpus.jsonl" <<'PY'
import json, random, sys
rng = random.Random(1234)
with open(sys.argv[1], "w") as f:
    for i in range(640):
        n = rng.randint(8, 120)
        ids = [rng.randint(4, 499) for _ in range(n)]
        f.write(json.dumps({"id": i, "input_ids": ids}) + "\n")
PY
echo "wrote $HERE/data/corpus.jsonl"
