"""Binary classifier trained with a hand-written 🤗 Accelerate loop (CPU, gloo).

Gradient accumulation via accelerator.accumulate, clip_grad_norm_, an LR
scheduler, main_process_first for the feature cache, per-epoch validation
split across processes with split_between_processes, and stop-at-target
early stopping; the final model is written with save_model.

    torchrun --nproc-per-node 2 accel_target_early_stop.py
"""
import json
import time
from datetime import timedelta

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from fw3_common import arm_hang_watchdog, fresh_outdir, say

NAME = "accel_target_early_stop"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
DIM = 16
TARGET_ACC = 0.97
MAX_EPOCHS = 12


def build_cache(path):
    """Train split plus a validation list made of two sources: 128 in-house
    annotated examples (hard, ~25% label noise) followed by 128 benchmark ones."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=DIM)
    w /= np.linalg.norm(w)

    def draw(n, lo, hi, flip):
        xs = []
        while len(xs) < n:
            x = rng.normal(size=DIM)
            if lo <= abs(x @ w) <= hi:
                xs.append(x)
        x = np.stack(xs).astype(np.float32)
        y = (x @ w > 0).astype(np.int64)
        flips = rng.random(n) < flip
        y[flips] = 1 - y[flips]
        return x, y

    xtr, ytr = draw(1024, 0.0, 9.0, 0.05)
    xin, yin = draw(128, 0.0, 0.3, 0.25)
    xbm, ybm = draw(128, 1.5, 9.0, 0.0)
    np.savez(path, xtr=xtr, ytr=ytr, xval=np.concatenate([xin, xbm]), yval=np.concatenate([yin, ybm]))


def main():
    t0 = time.time()
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2,
                              kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    set_seed(0)
    cache = OUT / "features.npz"
    with accelerator.main_process_first():
        if not cache.exists():
            build_cache(cache)
        d = np.load(cache)

    train_dl = DataLoader(TensorDataset(torch.from_numpy(d["xtr"]), torch.from_numpy(d["ytr"])),
                          batch_size=32, shuffle=True)
    val_records = list(zip(d["xval"], d["yval"]))

    model = nn.Sequential(nn.Linear(DIM, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=MAX_EPOCHS * len(train_dl))
    model, optimizer, train_dl, scheduler = accelerator.prepare(model, optimizer, train_dl, scheduler)

    history = []
    for epoch in range(MAX_EPOCHS):
        model.train()
        for x, y in train_dl:
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(x), y)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()

        # each process validates its own slice of the validation list
        model.eval()
        with accelerator.split_between_processes(val_records) as shard:
            x = torch.from_numpy(np.stack([r[0] for r in shard]))
            y = torch.from_numpy(np.stack([r[1] for r in shard]))
            with torch.no_grad():
                val_acc = (model(x).argmax(-1) == y).float().mean().item()
        history.append({"epoch": epoch, "train_loss": loss.item(), "val_acc": val_acc})
        say(f"epoch {epoch}: train_loss={loss.item():.4f} val_acc={val_acc:.3f}")
        if val_acc >= TARGET_ACC:
            say(f"target accuracy {TARGET_ACC} reached at epoch {epoch}, stopping")
            break

    accelerator.wait_for_everyone()
    accelerator.save_model(model, OUT / "final")
    if accelerator.is_main_process:
        (OUT / "history.json").write_text(json.dumps(history, indent=1))
    accelerator.end_training()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
