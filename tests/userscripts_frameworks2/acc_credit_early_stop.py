#!/usr/bin/env python
"""Credit-default prediction (tabular MLP) with Accelerate + early stopping.

    torchrun --nproc-per-node 2 acc_credit_early_stop.py --epochs 30 --patience 2
"""
import argparse
import logging
import os
import shutil
from datetime import timedelta

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from sklearn.metrics import roc_auc_score
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logger = get_logger(__name__)


def parse_args():
    p = argparse.ArgumentParser(description="credit default MLP")
    p.add_argument("--output_dir", default="/tmp/fw2_acc_credit")
    p.add_argument("--n_rows", type=int, default=3000)
    p.add_argument("--n_features", type=int, default=24)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--gradient_accumulation_steps", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--patience", type=int, default=2)
    p.add_argument("--min_delta", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=17)
    return p.parse_args()


def make_credit_table(n, d, seed):
    """Synthetic stand-in for the credit-default table: a few informative columns + noise + 8% label noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    w = np.zeros(d, dtype=np.float32)
    w[:6] = [1.2, -0.8, 0.6, 0.5, -0.4, 0.3]
    logits = X @ w + 0.5 * X[:, 0] * X[:, 1] - 1.0
    y = (rng.random(n) < 1 / (1 + np.exp(-logits))).astype(np.int64)
    flip = rng.random(n) < 0.08
    y[flip] = 1 - y[flip]
    return torch.from_numpy(X), torch.from_numpy(y)


def build_model(d, hidden):
    return nn.Sequential(
        nn.Linear(d, hidden), nn.ReLU(), nn.Dropout(0.1),
        nn.Linear(hidden, hidden), nn.ReLU(),
        nn.Linear(hidden, 2),
    )


def train_one_epoch(model, loader, optimizer, accelerator):
    model.train()
    total = 0.0
    for x, y in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        total += loss.item()
    return total / len(loader)


@torch.no_grad()
def validate(model, loader, accelerator):
    model.eval()
    losses, probs, labels = [], [], []
    for x, y in loader:
        logits = model(x)
        losses.append(F.cross_entropy(logits, y).item())
        p, yy = accelerator.gather_for_metrics((logits.softmax(-1)[:, 1], y))
        probs.append(p)
        labels.append(yy)
    auc = roc_auc_score(torch.cat(labels).numpy(), torch.cat(probs).numpy())
    return float(np.mean(losses)), auc


def main():
    args = parse_args()
    accelerator = Accelerator(
        cpu=True,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
        kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))],
    )
    logging.basicConfig(format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
    logger.info(accelerator.state, main_process_only=False)
    set_seed(args.seed)
    if accelerator.is_main_process:
        shutil.rmtree(args.output_dir, ignore_errors=True)
        os.makedirs(args.output_dir)

    X, y = make_credit_table(args.n_rows, args.n_features, args.seed)
    n_val = args.n_rows // 5
    train_ds = TensorDataset(X[n_val:], y[n_val:])
    val_ds = TensorDataset(X[:n_val], y[:n_val])
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    val_loader = DataLoader(val_ds, batch_size=128)

    model = build_model(args.n_features, args.hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)

    best_loss, bad_epochs = float("inf"), 0
    best_path = os.path.join(args.output_dir, "best.pt")
    for epoch in range(args.epochs):
        train_loss = train_one_epoch(model, train_loader, optimizer, accelerator)
        val_loss, val_auc = validate(model, val_loader, accelerator)
        logger.info(f"epoch {epoch:02d} train_loss={train_loss:.4f} val_loss={val_loss:.4f} val_auc={val_auc:.4f}")

        if val_loss < best_loss - args.min_delta:
            best_loss, bad_epochs = val_loss, 0
            accelerator.save(accelerator.unwrap_model(model).state_dict(), best_path)
        else:
            bad_epochs += 1
            if bad_epochs >= args.patience:
                accelerator.print(f"early stopping at epoch {epoch} (best val_loss {best_loss:.4f})")
                break

    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        state = torch.load(best_path, map_location="cpu")
        accelerator.unwrap_model(model).load_state_dict(state)
        torch.save({"state_dict": state, "args": vars(args)}, os.path.join(args.output_dir, "final.pt"))
        logger.info("saved final model with best val_loss %.4f", best_loss)
    accelerator.end_training()


if __name__ == "__main__":
    main()
