#!/usr/bin/env bash
# Tokenized training shards (as written by the preprocessing job: 5 shards of 800 examples).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
rm -rf data out && mkdir -p data
$PYTHON - <<'PY'
import torch
g = torch.Generator().manual_seed(0)
topic_words = torch.randint(0, 512, (4, 40), generator=g)
for s in range(5):
    labels = torch.randint(0, 4, (800,), generator=g)
    ids = torch.randint(0, 512, (800, 32), generator=g)
    mask = torch.rand(800, 32, generator=g) < 0.4
    pick = topic_words[labels][:, torch.randint(0, 40, (32,), generator=g)]
    ids = torch.where(mask, pick, ids)
    torch.save({"input_ids": ids, "labels": labels}, f"data/shard_{s:04d}.pt")
print("wrote 5 shards to data/")
PY
