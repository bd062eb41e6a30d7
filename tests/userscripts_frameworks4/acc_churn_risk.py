"""Customer churn-risk MLP trained with 🤗 Accelerate (CPU / gloo, 2 processes).

The feature export comes from the warehouse as two CSV files (train / holdout);
the main process materialises them first, every process reads them.  Training
uses gradient accumulation, clipping, a OneCycle schedule and save_state
checkpoints; validation is split across processes, each process scores its own
slice with sklearn and the per-process numbers are averaged with reduce(), so
nothing large is ever gathered.  Early stopping uses set_trigger/check_trigger.

    torchrun --nproc-per-node 2 acc_churn_risk.py --epochs 6
"""
import argparse
import csv
import math
from datetime import timedelta

import numpy as np
import torch
import torch.nn.functional as F
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import ProjectConfiguration, set_seed
from sklearn.metrics import log_loss, roc_auc_score
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from hfacc_common import arm_watchdog, run_dir, say

SCRIPT = "acc_churn_risk"
FEATURES = ["tenure_months", "monthly_spend", "support_calls", "late_payments", "logins_30d", "discount_pct",
            "plan_changes", "nps"]


def export_tables(out, seed):
    """Stand-in for the warehouse export job: writes customers_train.csv / customers_holdout.csv."""
    rng = np.random.default_rng(seed)
    n = 2400
    x = np.column_stack([
        rng.integers(1, 72, n), rng.gamma(4.0, 12.0, n), rng.poisson(1.2, n), rng.poisson(0.4, n),
        rng.poisson(14, n), rng.choice([0, 5, 10, 20], n), rng.poisson(0.3, n), rng.integers(-100, 101, n),
    ]).astype(np.float64)
    logit = -2.6 - 0.04 * x[:, 0] + 0.6 * x[:, 2] + 0.9 * x[:, 3] - 0.05 * x[:, 4] + 0.5 * x[:, 6] - 0.01 * x[:, 7]
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    ids = np.arange(100000, 100000 + n)
    splits = {"train": np.arange(0, 2000), "holdout": np.arange(2000, n)}
    for name, idx in splits.items():
        if name == "holdout":  # the holdout query is ORDER BY churned DESC, customer_id
            idx = idx[np.lexsort((ids[idx], -y[idx]))]
        with open(out / f"customers_{name}.csv", "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["customer_id", *FEATURES, "churned"])
            for i in idx:
                w.writerow([ids[i], *[round(v, 3) for v in x[i]], y[i]])


def read_table(path):
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    x = np.array([[float(r[f]) for f in FEATURES] for r in rows], dtype=np.float32)
    y = np.array([int(r["churned"]) for r in rows], dtype=np.float32)
    return x, y


class ChurnMLP(nn.Module):
    def __init__(self, d_in, hidden=64, p=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.GELU(), nn.Dropout(p),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)


def evaluate(accelerator, model, x_val, y_val, mean, std):
    """Each process scores its slice of the holdout; the metrics are averaged across processes."""
    model.eval()
    with accelerator.split_between_processes(list(range(len(y_val)))) as idx:
        xs = torch.from_numpy((x_val[idx] - mean) / std)
        with torch.no_grad():
            p = torch.sigmoid(accelerator.unwrap_model(model)(xs)).numpy()
        local = torch.tensor([log_loss(y_val[idx], p), roc_auc_score(y_val[idx], p)], dtype=torch.float64)
    model.train()
    return (accelerator.reduce(local, reduction="mean")).tolist()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--accum", type=int, default=2)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--patience", type=int, default=2)
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args()

    out = run_dir(SCRIPT)
    arm_watchdog(70)
    accelerator = Accelerator(
        cpu=True, gradient_accumulation_steps=a.accum,
        project_config=ProjectConfiguration(project_dir=str(out), automatic_checkpoint_naming=True, total_limit=2),
        kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))],
    )
    set_seed(a.seed)
    with accelerator.main_process_first():
        if accelerator.is_main_process:
            export_tables(out, a.seed)
        x_tr, y_tr = read_table(out / "customers_train.csv")
        x_val, y_val = read_table(out / "customers_holdout.csv")
    mean, std = x_tr.mean(0), x_tr.std(0) + 1e-6
    say(f"train {len(y_tr)} (churn {y_tr.mean():.1%}), holdout {len(y_val)} (churn {y_val.mean():.1%})")

    train_dl = DataLoader(TensorDataset(torch.from_numpy((x_tr - mean) / std), torch.from_numpy(y_tr)),
                          batch_size=a.batch_size, shuffle=True, drop_last=True)
    model = ChurnMLP(len(FEATURES))
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=1e-4)
    steps = a.epochs * math.ceil(len(train_dl) / accelerator.num_processes / a.accum)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=a.lr, total_steps=steps * accelerator.num_processes)
    pos_weight = torch.tensor((1 - y_tr.mean()) / y_tr.mean())
    model, opt, train_dl, sched = accelerator.prepare(model, opt, train_dl, sched)

    best, bad_epochs = float("inf"), 0
    for epoch in range(a.epochs):
        running = torch.zeros((), dtype=torch.float64)
        for xb, yb in train_dl:
            with accelerator.accumulate(model):
                loss = F.binary_cross_entropy_with_logits(model(xb), yb, pos_weight=pos_weight)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                opt.zero_grad()
            running += loss.detach()
        train_loss = accelerator.reduce(running / len(train_dl), reduction="mean").item()
        val_logloss, val_auc = evaluate(accelerator, model, x_val, y_val, mean, std)
        say(f"epoch {epoch}: train_loss={train_loss:.4f} val_logloss={val_logloss:.4f} val_auc={val_auc:.3f}")
        accelerator.save_state()
        if val_logloss < best - 1e-4:
            best, bad_epochs = val_logloss, 0
        else:
            bad_epochs += 1
        if bad_epochs >= a.patience:
            accelerator.set_trigger()
        if accelerator.check_trigger():
            say(f"no improvement for {a.patience} epochs, stopping")
            break

    accelerator.wait_for_everyone()
    accelerator.save_model(model, out / "model")
    say(f"best holdout log-loss {best:.4f}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
