#!/usr/bin/env bash
# Writes the fine-tuning config used by cfg_main_only.py
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p configs
cat > configs/finetune.json <<'JSON'
{
  "model": {"hidden_size": 256, "dropout": 0.2},
  "training": {"learning_rate": 0.0005, "logging_steps": 5}
}
JSON
echo "wrote configs/finetune.json"
