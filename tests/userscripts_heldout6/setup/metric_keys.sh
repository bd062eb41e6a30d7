#!/usr/bin/env bash
# Builds data/corpus.jsonl: short topic-labelled sentences, followed by the
# "longform" export (full articles) that the export job appends at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import json, random
random.seed(7)
topics = [["goal", "match", "league", "coach"], ["vote", "senate", "bill", "party"],
          ["cpu", "kernel", "driver", "chip"], ["rain", "storm", "wind", "sunny"],
          ["stock", "market", "bond", "rate"], ["film", "actor", "scene", "award"]]
filler = "the a of to and in on for with at by from it is was".split()
rows = []
for i in range(3000):
    t = random.randrange(6)
    words = [random.choice(topics[t] if random.random() < 0.35 else filler)
             for _ in range(random.randint(8, 40))]
    rows.append({"id": f"s{i}", "topic": t, "text": " ".join(words)})
for i in range(1000):
    t = random.randrange(6)
    words = [random.choice(topics[t] if random.random() < 0.2 else filler)
             for _ in range(random.randint(80, 300))]
    rows.append({"id": f"l{i}", "topic": t, "text": " ".join(words)})
with open("data/corpus.jsonl", "w") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
print("wrote", len(rows), "rows to data/corpus.jsonl")
PY
