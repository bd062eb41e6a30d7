#!/usr/bin/env bash
# Builds the corpus and leaves the checkpoint an earlier (interrupted) run wrote after epoch 1.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data checkpoints
PYTHON="${PYTHON:-python}"
"$PYTHON" - <<'PY'
import random
words = ("the quick brown fox jumps over a lazy dog while seven wizards quietly "
         "judge boxing matches and pack my box with five dozen liquor jugs").split()
rng = random.Random(3)
lines = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 14))) for _ in range(3000)]
open("data/corpus.txt", "w").write("\n".join(lines) + "\n")
PY
# the "previous run": same Trainer code, stopped after epoch 1
"$PYTHON" - <<'PY'
import os, random, sys
import numpy as np, torch
sys.path.insert(0, ".")
from trainer_resume import CharDataset, TinyGRULM
torch.manual_seed(0); np.random.seed(0); random.seed(0)
ds = CharDataset(open("data/corpus.txt").read(), 64)
model = TinyGRULM(ds.vocab_size)
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
x, y = ds[0]
loss = torch.nn.functional.cross_entropy(model(x[None]).reshape(-1, ds.vocab_size), y)
loss.backward(); opt.step(); sched.step()
state = {
    "model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
    "epoch": 1, "global_step": 230, "best_loss": float(loss.detach()),
    "rng": {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()},
}
torch.save(state, "checkpoints/epoch_001.pt")
print("wrote checkpoints/epoch_001.pt")
PY
