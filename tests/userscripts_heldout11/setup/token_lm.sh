#!/usr/bin/env bash
# Pre-tokenized uint16 shards (one per rank) under ./data/tokens
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
"$PYTHON" - <<'PY'
import json, os
import numpy as np
rng = np.random.default_rng(3)
os.makedirs("data/tokens", exist_ok=True)
V = 512
# part-000: curated subset; part-001: the web dump, much larger
sizes = {"part-000.bin": 1_500_000, "part-001.bin": 6_000_000}
manifest = {}
for name, n in sizes.items():
    # simple Markov-ish token stream so there's something to learn
    base = rng.integers(1, V, size=n, dtype=np.int64)
    base[1::2] = (base[0::2][: len(base[1::2])] * 7 + 3) % V
    base.astype(np.uint16).tofile(os.path.join("data/tokens", name))
    manifest[name] = n
json.dump({"vocab_size": V, "dtype": "uint16", "shards": manifest}, open("data/tokens/manifest.json", "w"), indent=1)
print(manifest)
PY
