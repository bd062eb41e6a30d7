#!/usr/bin/env bash
# Recreates data/{train,val}.pt for the transliteration seq2seq task.
# val.pt = current export (512) followed by the regression set from the 2023 export (512),
# which was tokenized with the previous target vocabulary.
set -euo pipefail
PYTHON=${PYTHON:-python}
mkdir -p data
"$PYTHON" - <<'PY'
import torch
PAD, BOS, EOS, FIRST, V = 0, 1, 2, 4, 48          # token ids FIRST..V-1 are symbols
L = 10
table = FIRST + torch.randperm(V - FIRST, generator=torch.Generator().manual_seed(7))
old_table = FIRST + (table - FIRST + 7) % (V - FIRST)   # previous target vocab ordering

def make(n, seed, tab):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(FIRST, V, (n, L), generator=g)
    tgt = tab[src - FIRST].flip(1)                   # transliterate, right-to-left script
    bos = torch.full((n, 1), BOS); eos = torch.full((n, 1), EOS)
    return src, torch.cat([bos, tgt, eos], 1)

src, tgt = make(4096, 0, table)
torch.save({"src": src, "tgt": tgt, "vocab": V}, "data/train.pt")
s1, t1 = make(512, 1, table)
s2, t2 = make(512, 2, old_table)
torch.save({"src": torch.cat([s1, s2]), "tgt": torch.cat([t1, t2]), "vocab": V}, "data/val.pt")
PY
ls data
