#!/usr/bin/env bash
# Recreates the run directory the way the preemptible queue left it: a first job trained for 600
# steps (checkpoints at 200/400/600) and was preempted while step_000600.pt was being written,
# so that file is cut short. The restarted job (torchrun --nproc-per-node 2 tabular_trainer.py)
# starts from this directory.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
rm -rf runs/tabular
# first job: 600 steps (a single process is enough to produce the same checkpoint files)
"$PYTHON" -m torch.distributed.run --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint 127.0.0.1:0 \
    tabular_trainer.py --max-steps 600 --save-every 200 > /dev/null
# preemption hit while the last checkpoint was being written
"$PYTHON" - <<'PY'
import os
p = "runs/tabular/checkpoints/step_000600.pt"
size = os.path.getsize(p)
with open(p, "r+b") as f:
    f.truncate(int(size * 0.45))
print("run dir:", sorted(os.listdir("runs/tabular/checkpoints")), f"(step_000600.pt cut at {int(size*0.45)}/{size} bytes)")
PY
