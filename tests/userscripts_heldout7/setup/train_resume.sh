#!/usr/bin/env bash
# Leaves behind the checkpoint of an earlier run of train_resume.py (finished epoch 3 of 6, then preempted).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p checkpoints/resume
$PYTHON - <<'PY'
import torch, torch.nn as nn
torch.manual_seed(3)
model = nn.Sequential(nn.Linear(24, 96), nn.SiLU(), nn.Linear(96, 96), nn.SiLU(), nn.Linear(96, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True)
# one fake step so the optimizer has momentum buffers like a real run
model(torch.randn(8, 24)).pow(2).mean().backward(); opt.step()
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
            "best_val": 0.41, "args": {"lr": 0.05, "epochs": 6}}, "checkpoints/resume/last.pt")
PY
echo "wrote checkpoints/resume/last.pt"
