#!/usr/bin/env bash
# Writes the run config used by pinned_trainer.py (copied from the team's 2x32-core CPU box).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p configs
"${PYTHON:-python}" - <<'PY'
import json
cfg = {
    "model": {"in_dim": 32, "hidden": 128, "n_classes": 10},
    "optim": {"lr": 3e-3, "weight_decay": 0.01},
    "data": {"n_train": 4096, "batch_size": 64},
    "runtime": {"epochs": 3, "cores_per_rank": 16, "log_every": 10},
}
with open("configs/pinned_cpu.json", "w") as f:
    json.dump(cfg, f, indent=2)
print("wrote configs/pinned_cpu.json")
PY
