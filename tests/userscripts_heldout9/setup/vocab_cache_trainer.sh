#!/bin/bash
# Synthetic review corpus + the vocab cache left behind by yesterday's run.
set -e
cd "$(dirname "$0")/.."
mkdir -p data cache
"$PYTHON" - <<'PY'
import json, random
random.seed(3)
pos = ["great", "loved it", "fantastic", "would buy again", "excellent value", "works well"]
neg = ["terrible", "broke after a day", "awful", "refund please", "poor quality", "does not work"]
filler = ["the", "product", "shipping", "was", "and", "really", "box", "color", "size", "price"]
rows = []
for i in range(2000):
    label = random.randint(0, 1)
    words = random.choices(filler, k=random.randint(3, 8)) + [random.choice(pos if label else neg)]
    random.shuffle(words)
    rows.append({"text": " ".join(words), "label": label})
with open("data/reviews.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
# cache from an earlier run of the same job
chars = sorted({c for r in rows for c in r["text"]})
stoi = {c: i for i, c in enumerate(["<pad>", "<unk>"] + chars)}
json.dump(stoi, open("cache/vocab.json", "w"))
print("wrote", len(rows), "rows, vocab", len(stoi))
PY
