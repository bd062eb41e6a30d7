#!/usr/bin/env bash
# Writes the tabular training set, its class list and the experiment config.
# The class list was regenerated after "backorder" was added; config.json was not.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python}" - <<'PY'
import json
import torch
g = torch.Generator().manual_seed(0)
classes = ["delivered", "delayed", "lost", "returned", "backorder"]
n, d = 6000, 24
centers = torch.randn(len(classes), d, generator=g) * 2
y = torch.randint(0, len(classes), (n,), generator=g)
x = centers[y] + torch.randn(n, d, generator=g) * 3 + 5
torch.save({"x": x, "y": y}, "data/train.pt")
with open("data/classes.txt", "w") as f:
    f.write("\n".join(classes) + "\n")
with open("config.json", "w") as f:
    json.dump({"num_classes": 4, "hidden": 96, "lr": 1e-3, "epochs": 4, "batch_size": 128,
               "val_fraction": 0.1}, f, indent=2)
print("wrote data/train.pt data/classes.txt config.json")
PY
