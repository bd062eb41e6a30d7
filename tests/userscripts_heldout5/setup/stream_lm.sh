#!/usr/bin/env bash
# Build a small sharded token corpus + manifest for stream_lm.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data/shards"
"$PYTHON" - "$HERE/data" <<'PY'
import json, os, random, sys
out = sys.argv[1]
rng = random.Random(1234)
vocab, seq = 512, 33
shards, total = [], 0
for i in range(5):
    name = f"shard-{i:05d}.jsonl"
    n = 192
    with open(os.path.join(out, "shards", name), "w") as f:
        for _ in range(n):
            f.write(json.dumps({"ids": [rng.randrange(vocab) for _ in range(seq)]}) + "\n")
    shards.append({"file": name, "num_records": n})
    total += n
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump({"vocab_size": vocab, "seq_len": seq, "num_records": total, "shards": shards}, f, indent=1)
print(f"wrote {len(shards)} shards, {total} records")
PY
