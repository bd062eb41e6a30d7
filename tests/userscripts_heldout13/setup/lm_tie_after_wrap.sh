#!/usr/bin/env bash
# builds a small character corpus next to the script
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import random
random.seed(0)
words = "the of and to in is was for on that with as by at from his her it an be are were this which or".split()
nouns = "model data rank gradient tensor batch epoch loss layer token weight optimizer process".split()
lines = []
for _ in range(4000):
    n = random.randint(6, 14)
    lines.append(" ".join(random.choice(words + nouns) for _ in range(n)).capitalize() + ".")
open("data/corpus.txt", "w").write("\n".join(lines) + "\n")
PY
echo "corpus: $(wc -c < data/corpus.txt) bytes"
