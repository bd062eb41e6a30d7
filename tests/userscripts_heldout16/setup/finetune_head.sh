#!/usr/bin/env bash
# Builds a small "pretrained" checkpoint and a labelled fine-tuning set next to the script.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data checkpoints
"$PYTHON" - <<'PY'
import torch, torch.nn as nn
torch.manual_seed(0)
# pretrained backbone + 10-class head (the upstream task)
backbone = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 64), nn.GELU())
head = nn.Linear(64, 10)
torch.save({"backbone": backbone.state_dict(), "head": head.state_dict(), "num_classes": 10},
           "checkpoints/pretrained.pt")
# downstream task has 4 classes
x = torch.randn(2048, 32)
w = torch.randn(32, 4)
y = (x @ w).argmax(1)
torch.save({"x": x, "y": y}, "data/finetune.pt")
print("wrote checkpoints/pretrained.pt and data/finetune.pt")
PY
