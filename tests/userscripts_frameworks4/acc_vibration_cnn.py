"""Machine-condition classifier on 3-axis vibration windows (1D CNN, 🤗 Accelerate).

The main process converts the raw recordings into one float32 window cache
(`windows.npy`, memory-mapped by every process so the data is not duplicated in
RAM) plus a label file.  After the warm-up epoch the main process scores every
window and drops the ones the model considers mislabelled (confident-learning
style loss pruning), so later epochs train on the cleaned cache.  Validation
uses gather_for_metrics; checkpoints via save_state.

    torchrun --nproc-per-node 2 acc_vibration_cnn.py --epochs 3
"""
import argparse
import json
from datetime import timedelta

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import ProjectConfiguration, set_seed
from torch import nn
from torch.utils.data import DataLoader, Dataset

from hfacc_common import arm_watchdog, run_dir, say

SCRIPT = "acc_vibration_cnn"
CLASSES = ["normal", "imbalance", "misalignment", "bearing_wear"]
FS, WIN = 1024, 128


def synthesize(path_x, path_y, n, seed, noisy_frac=0.1):
    """Stand-in for the recording converter: n windows of shape (3, WIN) + labels."""
    rng = np.random.default_rng(seed)
    t = np.arange(WIN) / FS
    y = rng.integers(0, len(CLASSES), n)
    rpm_hz = rng.uniform(20, 40, n)[:, None]
    x = np.empty((n, 3, WIN), dtype=np.float32)
    for axis in range(3):
        base = np.sin(2 * np.pi * rpm_hz * t + rng.uniform(0, 6.3, (n, 1)))
        harm = np.where((y == 1)[:, None], 1.5 * base, 0) + np.where((y == 2)[:, None] & (axis > 0),
                                                                     np.sin(4 * np.pi * rpm_hz * t), 0)
        spikes = np.where((y == 3)[:, None], (rng.random((n, WIN)) < 0.04) * rng.normal(0, 3, (n, WIN)), 0)
        x[:, axis] = base + harm + spikes + rng.normal(0, 0.3, (n, WIN))
    flip = rng.random(n) < noisy_frac  # operator tagging mistakes
    y[flip] = rng.integers(0, len(CLASSES), flip.sum())
    np.save(path_x, x)
    np.save(path_y, y.astype(np.int64))


class WindowCache(Dataset):
    def __init__(self, path_x, path_y):
        self.path_x, self.path_y = path_x, path_y
        self.open()

    def open(self):
        self.x = np.load(self.path_x, mmap_mode="r")
        self.y = np.load(self.path_y)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return torch.from_numpy(np.array(self.x[i])), int(self.y[i])

    def rewrite(self, keep):
        """Keep only the rows in `keep`, write the cache back and re-open it."""
        x, y = np.asarray(self.x[keep]), self.y[keep]
        np.save(self.path_x, x)
        np.save(self.path_y, y)
        self.open()


class VibrationCNN(nn.Module):
    def __init__(self, n_classes, width=32):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(3, width, 7, padding=3), nn.BatchNorm1d(width), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(width, width, 5, padding=2), nn.BatchNorm1d(width), nn.ReLU(), nn.MaxPool1d(2),
            nn.Conv1d(width, width, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool1d(1))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


@torch.no_grad()
def per_sample_loss(model, ds, batch_size=512):
    model.eval()
    losses = []
    for s in range(0, len(ds), batch_size):
        xb = torch.from_numpy(np.array(ds.x[s: s + batch_size]))
        yb = torch.from_numpy(ds.y[s: s + batch_size])
        losses.append(F.cross_entropy(model(xb), yb, reduction="none"))
    model.train()
    return torch.cat(losses).numpy()


@torch.no_grad()
def validate(accelerator, model, loader):
    model.eval()
    correct = total = 0
    for xb, yb in loader:
        preds, labels = accelerator.gather_for_metrics((model(xb).argmax(-1), yb))
        correct += (preds == labels).sum().item()
        total += labels.numel()
    model.train()
    return correct / total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--n-windows", type=int, default=12000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--prune-quantile", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()

    out = run_dir(SCRIPT)
    arm_watchdog(75)
    accelerator = Accelerator(cpu=True, project_config=ProjectConfiguration(project_dir=str(out),
                                                                            automatic_checkpoint_naming=True),
                              kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    set_seed(args.seed)
    with accelerator.main_process_first():
        if accelerator.is_main_process:
            synthesize(out / "windows.npy", out / "labels.npy", args.n_windows, args.seed)
            synthesize(out / "val_windows.npy", out / "val_labels.npy", 1024, args.seed + 1, noisy_frac=0.0)
        train_ds = WindowCache(out / "windows.npy", out / "labels.npy")
        val_ds = WindowCache(out / "val_windows.npy", out / "val_labels.npy")
    say(f"{len(train_ds)} training windows ({train_ds.x.nbytes / 2**20:.1f} MiB mapped), {len(val_ds)} val")

    model = VibrationCNN(len(CLASSES))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True, drop_last=True)
    val_dl = DataLoader(val_ds, batch_size=256)
    model, optimizer, train_dl, val_dl = accelerator.prepare(model, optimizer, train_dl, val_dl)

    history = []
    for epoch in range(args.epochs):
        seen = 0
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            seen += len(yb)
        acc = validate(accelerator, model, val_dl)
        history.append({"epoch": epoch, "val_acc": acc, "train_windows": len(train_ds)})
        say(f"epoch {epoch}: trained on {seen} windows, val_acc={acc:.3f}")
        accelerator.save_state()

        if epoch == 0:
            if accelerator.is_main_process:
                losses = per_sample_loss(accelerator.unwrap_model(model), train_ds)
                keep = np.flatnonzero(losses <= np.quantile(losses, args.prune_quantile))
                train_ds.rewrite(keep)
                say(f"pruned {len(losses) - len(keep)} suspicious windows, {len(train_ds)} left")
            accelerator.wait_for_everyone()

    accelerator.wait_for_everyone()
    accelerator.save_model(model, out / "model")
    if accelerator.is_main_process:
        (out / "history.json").write_text(json.dumps(history, indent=1))
    accelerator.end_training()
    say("done")


if __name__ == "__main__":
    main()
