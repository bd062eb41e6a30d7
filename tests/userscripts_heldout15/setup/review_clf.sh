#!/usr/bin/env bash
# Writes data/part-0.tsv and data/part-1.tsv next to review_clf.py.
# The two parts come from two exports of the review database; the second one was
# exported from the desktop tool, which saves text files in the Windows code page.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"$PYTHON" - <<'PY'
import random
rng = random.Random(7)
pos = ["great value", "works perfectly", "the café loved it", "really good", "naïve design but solid",
       "five stars", "would buy again", "fast delivery"]
neg = ["broke after a week", "terrible support", "not as described", "waste of money",
       "the crème finish peeled", "arrived damaged", "too small", "stopped working"]
filler = ["honestly", "overall", "for the price", "as a gift", "in the kitchen", "after two months"]
def review():
    lab = rng.randrange(2)
    words = [rng.choice(pos if lab else neg) for _ in range(rng.randint(1, 3))]
    words.insert(rng.randrange(len(words) + 1), rng.choice(filler))
    return lab, ", ".join(words)
for part, enc in [(0, "utf-8"), (1, "cp1252")]:
    with open(f"data/part-{part}.tsv", "w", encoding=enc, newline="\n") as f:
        f.write("label\ttext\n")
        for _ in range(1200):
            lab, txt = review()
            f.write(f"{lab}\t{txt}\n")
PY
