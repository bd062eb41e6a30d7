#!/usr/bin/env bash
# Per-rank resume state left behind by the previous run of resume_seq2seq.py
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p run_state/copy-task
cat > run_state/copy-task/rank0.json <<'JSON'
{"run": "copy-task", "world_size": 2, "rank": 0, "epoch": 2, "global_step": 96, "sampler_seed": 1234, "lr": 0.0008}
JSON
cat > run_state/copy-task/rank1.json <<'JSON'
{"run": "copy-task", "world_size": 4, "rank": 1, "epoch": 2, "global_step": 96, "sampler_seed": 1234, "lr": 0.0008}
JSON
echo "wrote run_state/copy-task/rank{0,1}.json"
