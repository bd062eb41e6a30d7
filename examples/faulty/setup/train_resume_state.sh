#!/bin/bash
# state left by earlier jobs: a 3-rank run, then a 2-rank run that died (SIGKILL) right after rank 0 rewrote its state
cd "$(dirname "$0")/.." && d=checkpoints/train_resume_state/state
mkdir -p $d
echo '{"epoch": 1, "world_size": 2, "seed": 17}' > $d/rank0.json
echo '{"epoch": 1, "world_size": 3, "seed": 17}' > $d/rank1.json
echo '{"epoch": 1, "world_size": 3, "seed": 17}' > $d/rank2.json
