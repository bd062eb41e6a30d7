#!/bin/bash
# the pretrained weights the fine-tuning job starts from (same architecture as build_model())
cd "$(dirname "$0")/.." && mkdir -p checkpoints/pretrained
${PYTHON:-python3} -c "
import torch; torch.manual_seed(7)
from train_finetune import build_model
torch.save(build_model().state_dict(), 'checkpoints/pretrained/regressor.pt')"
