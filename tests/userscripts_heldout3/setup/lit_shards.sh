#!/usr/bin/env bash
# Writes data/shards/: 4 training shards of 2048 samples and the validation split, which is small
# enough to fit in a single shard (synthetic 8-class problem, seeded).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
rm -rf data/shards && mkdir -p data/shards
"$PYTHON" - <<'PY'
import torch
g = torch.Generator().manual_seed(3)
W = torch.randn(32, 8, generator=g)
def make(n):
    x = torch.randn(n, 32, generator=g)
    logits = torch.tanh(x) @ W + 0.3 * torch.randn(n, 8, generator=g)
    return {"x": x, "y": logits.argmax(1)}
for i in range(4):
    torch.save(make(2048), f"data/shards/train-{i:05d}.pt")
torch.save(make(1024), "data/shards/val-00000.pt")
print("wrote 4 train shards x 2048, 1 val shard x 1024")
PY
