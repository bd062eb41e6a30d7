#!/usr/bin/env bash
# Builds a small plain-text corpus for charlm_tokcache.py under ./data
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import random
random.seed(0)
words = ("the a model data train loss step rank node gradient batch epoch token sequence layer "
         "weight optimizer learning rate warmup cosine schedule checkpoint resume shard worker").split()
with open("data/corpus.txt", "w") as f:
    for i in range(4000):
        n = random.randint(6, 18)
        f.write(" ".join(random.choice(words) for _ in range(n)) + ".\n")
print("wrote data/corpus.txt")
PY
