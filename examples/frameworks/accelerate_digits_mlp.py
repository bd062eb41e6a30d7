"""Handwritten digits (sklearn's 8x8 digits) with a wide MLP and Accelerate.

At the end the main process writes one compressed training checkpoint and every
process reloads it for the test pass, so the reported numbers come from the
exported file.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 accelerate_digits_mlp.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import gzip
import tempfile
import time
from datetime import timedelta

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from sklearn.datasets import load_digits
from sklearn.metrics import accuracy_score
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader, TensorDataset

OUT_DIR = os.path.join(tempfile.gettempdir(), "digits-mlp")
CKPT = os.path.join(OUT_DIR, "last.pt.gz")  # checkpoints live on a small quota, keep them compressed
EPOCHS = 3
WIDTH = 1536


def load_checkpoint(path, poll_s=0.2, timeout_s=120):
    deadline = time.time() + timeout_s
    while not os.path.exists(path):  # the main process may not have written it yet
        if time.time() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout_s}s")
        time.sleep(poll_s)
    with gzip.open(path, "rb") as f:
        return torch.load(f, map_location="cpu")


def save_checkpoint(path, model, optimizer, epoch):
    with gzip.open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, f)


def main():
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    set_seed(0)
    if accelerator.is_main_process:
        os.makedirs(OUT_DIR, exist_ok=True)
        if os.path.exists(CKPT):
            os.remove(CKPT)
    accelerator.wait_for_everyone()

    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.2, random_state=0, stratify=y)
    train_dl = DataLoader(TensorDataset(x_tr, y_tr), batch_size=64, shuffle=True)
    test_dl = DataLoader(TensorDataset(x_te, y_te), batch_size=128)

    model = nn.Sequential(nn.Linear(64, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    model, optimizer, train_dl, test_dl = accelerator.prepare(model, optimizer, train_dl, test_dl)

    for epoch in range(EPOCHS):
        model.train()
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        accelerator.print(f"epoch {epoch}: loss={loss.item():.4f}")

    if accelerator.is_main_process:
        save_checkpoint(CKPT, accelerator.unwrap_model(model), optimizer, EPOCHS)
        accelerator.print(f"wrote {CKPT} ({os.path.getsize(CKPT) / 2**20:.1f} MiB)")

    state = load_checkpoint(CKPT)
    accelerator.unwrap_model(model).load_state_dict(state["model"])

    model.eval()
    preds, refs = [], []
    for xb, yb in test_dl:
        with torch.no_grad():
            p, r = accelerator.gather_for_metrics((model(xb).argmax(-1), yb))
        preds.append(p)
        refs.append(r)
    acc = accuracy_score(torch.cat(refs).numpy(), torch.cat(preds).numpy())
    accelerator.print(f"test accuracy from exported checkpoint (epoch {state['epoch']}): {acc:.4f}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
