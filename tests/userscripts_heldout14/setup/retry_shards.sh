#!/usr/bin/env bash
# Export the toy sentiment corpus into one JSONL shard per training process.
# (The export of the second shard was cut off by a preemption of the export job,
#  which is how the original data looked when the training job was launched.)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
$PYTHON - <<'PY'
import json, random
random.seed(7)
words = ["good", "bad", "great", "awful", "fine", "poor", "nice", "boring", "fun", "slow",
         "movie", "plot", "actor", "scene", "story", "music", "ending", "cast", "film", "script"]
for shard in range(2):
    lines = []
    for i in range(3000):
        toks = [random.choice(words) for _ in range(random.randint(4, 20))]
        label = int(sum(t in ("good", "great", "fine", "nice", "fun") for t in toks) >
                    sum(t in ("bad", "awful", "poor", "boring", "slow") for t in toks))
        lines.append(json.dumps({"id": f"{shard}-{i}", "text": " ".join(toks), "label": label}))
    text = "\n".join(lines) + "\n"
    if shard == 1:
        text = text[: len(text) - 37]   # export interrupted mid-record
    with open(f"data/shard-{shard:05d}.jsonl", "w") as f:
        f.write(text)
print("wrote data/shard-0000{0,1}.jsonl")
PY
