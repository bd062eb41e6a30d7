#!/usr/bin/env bash
# Write a small intent-classification CSV (taxonomy ids as labels) under ./data
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
"$PYTHON" - <<'PY'
import csv, os, random
random.seed(7)
os.makedirs("data", exist_ok=True)
# intent ids come from the product taxonomy, so they are sparse integers
intents = {12: "refund order money back return", 40: "track package delivery where shipping",
           7: "password login account reset locked", 33: "invoice billing charge payment card",
           105: "cancel subscription plan stop renew"}
filler = "please i would like to know about my the can you help with".split()
with open("data/train.csv", "w", newline="") as f:
    w = csv.writer(f); w.writerow(["text", "label"])
    for i in range(640):
        lab = random.choice(list(intents))
        toks = random.choices(intents[lab].split(), k=3) + random.choices(filler, k=random.randint(3, 9))
        random.shuffle(toks)
        w.writerow([" ".join(toks), lab])
print("wrote data/train.csv")
PY
