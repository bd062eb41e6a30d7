#!/usr/bin/env bash
# Writes data/reviews_train.tsv and data/reviews_val.tsv (label<TAB>text) next to feature_cache_lock.py.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python3}" - <<'PY'
import random
random.seed(7)
pos = "great excellent lovely superb enjoyable wonderful solid sharp fast reliable".split()
neg = "awful terrible broken slow boring noisy flimsy useless cheap disappointing".split()
filler = ("the a this it product item battery screen sound price delivery box design "
          "was is very quite really after week month used bought and but with for").split()
def review(label):
    words = [random.choice(filler) for _ in range(random.randint(12, 40))]
    for _ in range(random.randint(1, 4)):
        words.insert(random.randrange(len(words)), random.choice(pos if label else neg))
    if random.random() < 0.15:  # some noise from the other side
        words.insert(random.randrange(len(words)), random.choice(neg if label else pos))
    return " ".join(words)
for name, n in (("train", 6000), ("val", 800)):
    with open(f"data/reviews_{name}.tsv", "w") as f:
        for _ in range(n):
            y = random.randint(0, 1)
            f.write(f"{y}\t{review(y)}\n")
PY
echo "wrote $(wc -l < data/reviews_train.tsv) train / $(wc -l < data/reviews_val.tsv) val reviews"
