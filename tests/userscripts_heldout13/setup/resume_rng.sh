#!/usr/bin/env bash
# Reproduce the state a user leaves behind: a quick single-process debug run
# (`python resume_rng.py --epochs 1`) that wrote checkpoints/last.pt.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
rm -rf checkpoints
env -u RANK -u WORLD_SIZE -u LOCAL_RANK "$PYTHON" resume_rng.py --epochs 1
ls -l checkpoints
