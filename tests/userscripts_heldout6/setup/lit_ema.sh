#!/usr/bin/env bash
# Builds data/digits.pt: 8x8 "digit-like" prototypes plus noise, 10 classes.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p data
"${PYTHON:-python}" - <<'PY'
import torch
g = torch.Generator().manual_seed(3)
protos = torch.rand(10, 64, generator=g)
def make(n):
    y = torch.randint(0, 10, (n,), generator=g)
    x = protos[y] + 0.25 * torch.randn(n, 64, generator=g)
    return x, y
tx, ty = make(2048)
vx, vy = make(501)   # odd on purpose: ranks get different val counts
torch.save({"train_x": tx, "train_y": ty, "val_x": vx, "val_y": vy}, "data/digits.pt")
print("wrote data/digits.pt", tx.shape, vx.shape)
PY
