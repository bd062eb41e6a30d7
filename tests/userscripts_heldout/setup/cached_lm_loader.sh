#!/usr/bin/env bash
# Text shards + manifest for cached_lm_loader.py, plus the pre-tokenised .ids
# caches that the nightly preprocessing job has produced so far (wiki only).
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf data/lm_corpus
mkdir -p data/lm_corpus
python3 - <<'PY'
import array, json, random, re, zlib
VOCAB = 4096
WORD_RE = re.compile(r"\w+|[^\w\s]")
rng = random.Random(7)
words = [''.join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
manifest = {"0": [], "1": []}

def write(name, n_words):
    with open(f"data/lm_corpus/{name}", "w") as f:
        line = []
        for i in range(n_words):
            line.append(rng.choice(words))
            if len(line) == 16:
                f.write(" ".join(line) + ".\n")
                line = []

def preprocess(name):
    ids = array.array("i")
    with open(f"data/lm_corpus/{name}") as f:
        for line in f:
            ids.extend(zlib.crc32(w.encode()) % (VOCAB - 1) + 1 for w in WORD_RE.findall(line.lower()))
    with open(f"data/lm_corpus/{name}.ids", "wb") as f:
        ids.tofile(f)

for i in range(4):
    name = f"wiki-{i:03d}.txt"; write(name, 40_000); manifest["0"].append(name); preprocess(name)
for i in range(4):
    name = f"forum-{i:03d}.txt"; write(name, 400_000); manifest["1"].append(name)
json.dump(manifest, open("data/lm_corpus/manifest.json", "w"), indent=1)
PY
ls data/lm_corpus; du -sh data/lm_corpus
