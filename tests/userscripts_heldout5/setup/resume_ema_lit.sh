#!/usr/bin/env bash
# Recreate the checkpoint directory left behind by the previous (preempted) run of resume_ema_lit.py:
# epochs 0..2 were completed; the job was killed while writing epoch_0003, after rank 0 had written
# model.pt/ema.pt and rank 1 its rng state, but before rank 0 wrote rng_state_rank0.pt.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
rm -rf checkpoints
$PYTHON - <<'PY'
import os, torch
from resume_ema_lit import LitRegressor, EMA
torch.manual_seed(0)
m = LitRegressor()
ema = EMA(m)
steps_per_epoch = 6000 // 2 // 64
for epoch in range(4):
    d = f"checkpoints/epoch_{epoch:04d}"
    os.makedirs(d, exist_ok=True)
    torch.save(m.state_dict(), f"{d}/model.pt")
    torch.save(ema.shadow.state_dict(), f"{d}/ema.pt")
    ranks = (0, 1) if epoch < 3 else (1,)
    for r in ranks:
        torch.save({"epoch": epoch, "global_step": (epoch + 1) * steps_per_epoch,
                    "torch_rng": torch.get_rng_state()}, f"{d}/rng_state_rank{r}.pt")
print("previous run checkpoints:", sorted(os.listdir("checkpoints")))
PY
