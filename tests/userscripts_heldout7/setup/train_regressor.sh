#!/usr/bin/env bash
# train_regressor.py makes its data synthetically; nothing to prepare.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs
