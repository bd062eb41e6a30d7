#!/usr/bin/env bash
# Produce the "pretrained" single-process checkpoint and a small character corpus for fsdp_lm.py
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/data"
cd "$HERE"
"$PYTHON" - <<'PY'
import random
import torch
from fsdp_lm import LMConfig, CharLM

random.seed(3)
words = ["shard", "gather", "reduce", "scatter", "rank", "world", "tensor", "mesh",
         "param", "grad", "step", "epoch", "loss", "batch", "optim", "state"]
lines = [" ".join(random.choice(words) for _ in range(random.randint(4, 12))) for _ in range(3000)]
with open("data/corpus.txt", "w") as f:
    f.write("\n".join(lines) + "\n")

torch.manual_seed(0)
model = CharLM(LMConfig())
torch.save(model.state_dict(), "data/pretrained.pt")
print("wrote data/corpus.txt and data/pretrained.pt")
PY
