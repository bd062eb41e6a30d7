#!/usr/bin/env bash
# Exports the teacher checkpoint that distill_trainer.py distils from.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python}"
mkdir -p "$HERE/teacher"
"$PYTHON" - "$HERE/teacher" <<'PY'
import sys, torch, torch.nn as nn
torch.manual_seed(7)
d_in, hidden, n_cls = 32, 256, 10
teacher = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Linear(hidden, hidden), nn.GELU(),
                        nn.Linear(hidden, n_cls))
torch.save({"model": teacher.state_dict(), "config": {"d_in": d_in, "hidden": hidden, "n_classes": n_cls}},
           f"{sys.argv[1]}/teacher.pt")
print("teacher saved")
PY
