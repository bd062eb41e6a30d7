#!/usr/bin/env bash
# Restore out/churn as the preempted job left it: checkpoint-150 is complete, the node was
# reclaimed while rank 0 was writing checkpoint-300/state.pt (only part of the file made it to disk).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
"$PYTHON" - <<'PY'
import copy, io, os, torch, torch.nn.functional as F
from resume_trainer import build_model, make_dataset, TrainingArguments

args = TrainingArguments()
torch.manual_seed(args.seed)
model = build_model()
ema = copy.deepcopy(model)
opt = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
steps_per_epoch = 20000 // 2 // args.per_device_train_batch_size
sched = torch.optim.lr_scheduler.OneCycleLR(opt, args.learning_rate,
                                            total_steps=steps_per_epoch * args.num_train_epochs)
ds = make_dataset(args.seed)
x, y = ds.tensors
for step in range(1, 301):
    idx = torch.randint(0, len(x), (64,))
    loss = F.binary_cross_entropy_with_logits(model(x[idx]).squeeze(-1), y[idx])
    opt.zero_grad(); loss.backward(); opt.step(); sched.step()
    if step % 150 == 0:
        state = {"model": model.state_dict(), "ema": ema.state_dict(), "optimizer": opt.state_dict(),
                 "scheduler": sched.state_dict(), "global_step": step}
        d = os.path.join(args.output_dir, f"checkpoint-{step}")
        os.makedirs(d, exist_ok=True)
        buf = io.BytesIO(); torch.save(state, buf); data = buf.getvalue()
        if step == 300:  # preempted mid-write
            data = data[: int(len(data) * 0.6)]
        with open(os.path.join(d, "state.pt"), "wb") as f:
            f.write(data)
        print("wrote", d, len(data), "bytes")
PY
