#!/usr/bin/env bash
# Recreates data/{train,val}.{pack,idx}: zlib-compressed 3x16x16 uint8 images
# appended to one pack file, plus a JSON index of [offset, length, label].
# The validation export has one record whose payload got damaged in transfer.
set -euo pipefail
PYTHON=${PYTHON:-python}
mkdir -p data
"$PYTHON" - <<'EOF'
import json, zlib
import torch

def export(split, n, seed):
    g = torch.Generator().manual_seed(seed)
    protos = torch.randint(0, 256, (10, 3, 16, 16), generator=torch.Generator().manual_seed(123))
    labels = torch.randint(0, 10, (n,), generator=g)
    index, off = [], 0
    with open(f"data/{split}.pack", "wb") as f:
        for i in range(n):
            lab = int(labels[i])
            noise = torch.randint(-40, 41, (3, 16, 16), generator=g)
            img = (protos[lab] + noise).clamp(0, 255).to(torch.uint8)
            blob = zlib.compress(img.numpy().tobytes(), 6)
            f.write(blob)
            index.append([off, len(blob), lab])
            off += len(blob)
    with open(f"data/{split}.idx", "w") as f:
        json.dump(index, f)
    return index

export("train", 2048, 0)
val_index = export("val", 256, 1)

# record 73 of the val export was partially overwritten (bad sector / interrupted rsync)
off, n, _ = val_index[73]
with open("data/val.pack", "r+b") as f:
    f.seek(off)
    f.write(b"\x00\xff\x13\x37")
EOF
echo "wrote $(ls data)"
