#!/usr/bin/env bash
# Recreates data/: two daily interaction shards + meta.json, and the stats cache of
# shard 0 (built offline by the nightly job). Shard 1 was re-exported after the
# nightly job ran, so it has no stats cache yet.
set -euo pipefail
PYTHON=${PYTHON:-python}
mkdir -p data
"$PYTHON" - <<'PY'
import json, torch
num_users, num_items, rows = 2000, 2000, 750_000
json.dump({"num_users": num_users, "num_items": num_items}, open("data/meta.json", "w"))
item_pop = 1.0 / torch.arange(1, num_items + 1).double() ** 0.8
taste = torch.randint(0, 20, (num_users,))
for day in range(2):
    g = torch.Generator().manual_seed(day)
    user = torch.randint(0, num_users, (rows,), generator=g)
    item = torch.multinomial(item_pop, rows, replacement=True, generator=g)
    item = (item + taste[user] * 97) % num_items   # per-user taste cluster
    ts = day * 86400 + torch.randint(0, 86400, (rows,), generator=g)
    torch.save({"user": user, "item": item, "ts": ts}, f"data/shard-{day:05d}.pt")
PY
"$PYTHON" recsys_twotower.py --build-stats data/shard-00000.pt
ls data
