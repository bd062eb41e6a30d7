#!/usr/bin/env bash
# Builds a synthetic intent-classification corpus (tab separated: label \t text).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python}" - <<'PY'
import random
rng = random.Random(7)
intents = ["billing", "refund", "login", "shipping", "cancel", "upgrade"]
common = [f"w{i}" for i in range(4000)]
keys = {it: [f"{it}_{j}" for j in range(40)] for it in intents}
with open("data/intents.tsv", "w") as f:
    for _ in range(400_000):
        it = rng.choice(intents)
        words = rng.choices(common, k=10) + rng.choices(keys[it], k=3)
        rng.shuffle(words)
        f.write(it + "\t" + " ".join(words) + "\n")
print("wrote data/intents.tsv")
PY
