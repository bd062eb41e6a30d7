#!/usr/bin/env bash
# Recreate the checkpoint folder left behind by the previous (preempted) run of
# resume_latest.py: both ranks snapshotted step 2200; at step 2400 rank 0 finished
# its snapshot but the job was killed while rank 1 was still writing its .tmp file.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf ckpt
$PYTHON - <<'PY'
import os, torch
from resume_latest import LitClassifier, SyntheticStream, save_snapshot

max_steps = 3000
for rank in range(2):
    torch.manual_seed(0)
    lit = LitClassifier()
    opt, sched = lit.configure_optimizers(max_steps)
    stream = SyntheticStream(rank, 32)
    last = 2400 if rank == 0 else 2200
    for step in range(1, last + 1):
        loss = lit.training_step(stream.next_batch())
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        if step % 200 == 0 and step >= 2200:
            save_snapshot("ckpt", rank, step, lit, opt, sched, stream)
    if rank == 1:
        # the interrupted write of step 2400
        with open("ckpt/rank1/step_002400.pt.tmp", "wb") as f:
            f.write(open("ckpt/rank1/step_002200.pt", "rb").read()[:4096])
for root, _, files in sorted(os.walk("ckpt")):
    for f in sorted(files):
        print(os.path.join(root, f))
PY
