#!/usr/bin/env bash
# Writes the review shards used by textcls_plain.py (one jsonl part per rank).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data/reviews
python3 - <<'PY'
import json, random
rng = random.Random(1234)
pos = "great excellent love wonderful superb fast reliable recommend happy perfect".split()
neg = "terrible awful hate broken slow refund waste poor disappointed useless".split()
filler = "the product it was and i this my after a for with delivery box price quality".split()

def review(label):
    words = pos if label == "positive" else neg if label == "negative" else pos[:3] + neg[:3]
    toks = [rng.choice(filler) for _ in range(rng.randint(8, 30))]
    for _ in range(rng.randint(2, 5)):
        toks.insert(rng.randrange(len(toks)), rng.choice(words))
    return " ".join(toks)

for part in range(2):
    with open(f"data/reviews/part-{part:04d}.jsonl", "w") as f:
        for i in range(640):
            label = rng.choice(["positive", "negative"])
            if part == 1 and i >= 200 and i % 37 == 0:
                label = "mixed"
            f.write(json.dumps({"id": f"{part}-{i}", "text": review(label), "label": label}) + "\n")
PY
echo "wrote $(ls data/reviews | wc -l) parts"
