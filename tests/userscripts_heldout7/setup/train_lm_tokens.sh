#!/usr/bin/env bash
# Builds a small synthetic text corpus, sorted by length (the preprocessing step does this for bucketing).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data/lm
$PYTHON - <<'PY'
import random
random.seed(11)
words = ("the a model data train loss rank token batch step gradient layer weight optimizer "
         "learning rate schedule epoch sample shard node cluster memory kernel tensor value").split()
def sent():
    n = random.randint(3, 22)
    return " ".join(random.choice(words) for _ in range(n)) + "."
lines = [sent() for _ in range(2400)]
val = [sent() for _ in range(256)]
lines.sort(key=len)
with open("data/lm/train.txt", "w") as f:
    f.write("\n".join(lines) + "\n")
with open("data/lm/valid.txt", "w") as f:
    f.write("\n".join(val) + "\n")
PY
echo "wrote data/lm"
