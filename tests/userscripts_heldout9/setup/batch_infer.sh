#!/usr/bin/env bash
# Writes the request file, vocab and a (randomly initialised) classifier checkpoint for batch_infer.py.
set -euo pipefail
HERE="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$HERE/infer_data"
"$PYTHON" - "$HERE/infer_data" <<'PY'
import json, random, sys, torch
sys.path.insert(0, sys.argv[1] + "/..")
out = sys.argv[1]
rng = random.Random(7)
words = [f"w{i}" for i in range(500)]
vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
json.dump(vocab, open(f"{out}/vocab.json", "w"))
with open(f"{out}/requests.jsonl", "w") as f:
    for i in range(301):
        n = rng.randint(8, 60)
        if i == 57:   # a pasted support-ticket thread, much longer than the rest
            n = 420
        text = " ".join(rng.choice(words) for _ in range(n))
        f.write(json.dumps({"id": f"req-{i:05d}", "text": text}) + "\n")
cfg = {"vocab_size": len(vocab), "dim": 64, "heads": 4, "layers": 2, "max_len": 128, "n_labels": 5}
json.dump(cfg, open(f"{out}/config.json", "w"))
import importlib.util
spec = importlib.util.spec_from_file_location("bi", f"{out}/../batch_infer.py")
bi = importlib.util.module_from_spec(spec); spec.loader.exec_module(bi)
torch.manual_seed(0)
torch.save(bi.TicketClassifier(cfg).state_dict(), f"{out}/model.pt")
print("wrote", out)
PY
