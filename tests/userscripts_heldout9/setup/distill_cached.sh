#!/usr/bin/env bash
# Builds the synthetic dataset, trains a small teacher and caches its logits on the train split.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/kd_data"
"$PYTHON" - "$HERE/kd_data" <<'PY'
import sys, torch, torch.nn as nn
out = sys.argv[1]
g = torch.Generator().manual_seed(0)
N, F, C = 2000, 32, 10
centers = torch.randn(C, F, generator=g) * 2.0
y = torch.randint(0, C, (N,), generator=g)
x = centers[y] + torch.randn(N, F, generator=g) * 1.5
torch.save({"x": x, "y": y}, f"{out}/dataset.pt")

perm = torch.randperm(N, generator=g)
train_idx, val_idx = perm[:1600].tolist(), perm[1600:].tolist()
torch.save({"train": train_idx, "val": val_idx}, f"{out}/split.pt")

torch.manual_seed(0)
teacher = nn.Sequential(nn.Linear(F, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, C))
opt = torch.optim.Adam(teacher.parameters(), lr=1e-3)
xt, yt = x[train_idx], y[train_idx]
for ep in range(30):
    for i in range(0, len(xt), 128):
        opt.zero_grad()
        nn.functional.cross_entropy(teacher(xt[i:i + 128]), yt[i:i + 128]).backward()
        opt.step()
teacher.eval()
with torch.no_grad():
    logits = teacher(xt)                      # one row per train-split example, in split order
    acc = (logits.argmax(1) == yt).float().mean().item()
torch.save(teacher.state_dict(), f"{out}/teacher.pt")
torch.save(logits, f"{out}/teacher_logits_train.pt")
print(f"teacher train acc {acc:.3f}, cached logits {tuple(logits.shape)}")
PY
