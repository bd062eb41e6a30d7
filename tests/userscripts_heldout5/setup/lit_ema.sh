#!/usr/bin/env bash
# Tokenize a synthetic intent-classification corpus for lit_ema.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data"
"$PYTHON" - "$HERE/data" <<'PY'
import json, os, random, sys
out = sys.argv[1]
rng = random.Random(42)
BASE_VOCAB = 1000                       # word-piece vocab the model config was made for
SPECIAL = {"[PAD]": 0, "[UNK]": 1, "[URL]": BASE_VOCAB, "[EMAIL]": BASE_VOCAB + 1}  # added later by the tokenizer
n_classes, seq = 6, 24
centers = [[rng.randrange(2, BASE_VOCAB) for _ in range(30)] for _ in range(n_classes)]

def make(n, allow_special):
    recs = []
    for i in range(n):
        y = rng.randrange(n_classes)
        ids = [rng.choice(centers[y]) if rng.random() < 0.6 else rng.randrange(2, BASE_VOCAB) for _ in range(rng.randint(8, seq))]
        if allow_special and i == 219:
            ids[3] = SPECIAL["[URL]"]   # "... see http://... for details"
        ids += [0] * (seq - len(ids))
        recs.append({"input_ids": ids, "label": y})
    return recs

for split, n, sp in (("train", 1024, True), ("valid", 256, False)):
    with open(os.path.join(out, f"{split}.jsonl"), "w") as f:
        for r in make(n, sp):
            f.write(json.dumps(r) + "\n")
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"base_vocab_size": BASE_VOCAB, "special_tokens": SPECIAL}, f, indent=1)
print("wrote train/valid")
PY
