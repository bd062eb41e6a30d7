"""Fraud classifier: Lightning-style module + hand-written DDP loop, ROC-AUC for model selection.

    bash setup/auc_eval.sh && torchrun --nproc-per-node 2 auc_eval.py
"""
import argparse
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

HERE = os.path.dirname(os.path.abspath(__file__))


def load_csv(path):
    arr = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    return torch.from_numpy(arr[:, :-1]), torch.from_numpy(arr[:, -1]).long()


def roc_auc(scores, labels):
    """Mann-Whitney U formulation of ROC-AUC (no sklearn on the cluster image)."""
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels)
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores), dtype=np.float64)
    ranks[order] = np.arange(1, len(scores) + 1)
    n_pos = int((labels == 1).sum())
    n_neg = int((labels == 0).sum())
    rank_sum = float(ranks[labels == 1].sum())
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


class FraudModule(nn.Module):
    """LightningModule-ish: loss / validation_step / configure_optimizers."""

    def __init__(self, n_features, hidden=64, lr=1e-3, pos_weight=2.0):
        super().__init__()
        self.hparams = dict(n_features=n_features, hidden=hidden, lr=lr, pos_weight=pos_weight)
        self.net = nn.Sequential(nn.Linear(n_features, hidden), nn.ReLU(),
                                 nn.Dropout(0.1), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x).squeeze(-1)

    def loss(self, logits, y):
        pw = torch.tensor(self.hparams["pos_weight"])
        return F.binary_cross_entropy_with_logits(logits, y.float(), pos_weight=pw)

    def validation_step(self, batch):
        x, y = batch
        logits = self(x)
        loss = F.binary_cross_entropy_with_logits(logits, y.float(), reduction="sum")
        return {"loss_sum": loss.item(), "scores": torch.sigmoid(logits).tolist(), "labels": y.tolist()}

    def validation_epoch_end(self, outputs):
        n = sum(len(o["labels"]) for o in outputs)
        scores = [s for o in outputs for s in o["scores"]]
        labels = [l for o in outputs for l in o["labels"]]
        return {"val_loss": sum(o["loss_sum"] for o in outputs) / n, "val_auc": roc_auc(scores, labels)}

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams["lr"])
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
        return opt, sched


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default=os.path.join(HERE, "data"))
    p.add_argument("--max-epochs", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--out", default=os.path.join(HERE, "best_auc.pt"))
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)

    xt, yt = load_csv(os.path.join(args.data_dir, "train.csv"))
    xv, yv = load_csv(os.path.join(args.data_dir, "val.csv"))
    train_ds = TensorDataset(xt, yt)
    sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler, drop_last=True)
    # each rank scores its own slice of the validation file, no padding / duplicates
    val_idx = np.array_split(np.arange(len(yv)), world)[rank]
    val_dl = DataLoader(TensorDataset(xv[val_idx], yv[val_idx]), batch_size=256)

    module = FraudModule(xt.shape[1])
    model = DDP(module)
    optimizer, scheduler = module.configure_optimizers()

    best_auc, bad_epochs, patience = -1.0, 0, 2
    for epoch in range(args.max_epochs):
        model.train()
        sampler.set_epoch(epoch)
        for step, batch in enumerate(train_dl):
            optimizer.zero_grad()
            x, y = batch
            loss = module.loss(model(x), y)   # forward through the DDP wrapper
            loss.backward()
            optimizer.step()
        scheduler.step()

        model.eval()
        with torch.no_grad():
            outputs = [module.validation_step(b) for b in val_dl]
        metrics = module.validation_epoch_end(outputs)
        # average the per-rank metrics
        t = torch.tensor([metrics["val_loss"], metrics["val_auc"]], dtype=torch.float64)
        dist.all_reduce(t)
        t /= world
        val_loss, val_auc = t.tolist()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f} val_loss {val_loss:.4f} val_auc {val_auc:.4f} "
                  f"lr {scheduler.get_last_lr()[0]:.2e}", flush=True)

        if val_auc > best_auc:
            best_auc, bad_epochs = val_auc, 0
            if rank == 0:
                torch.save({"state_dict": module.state_dict(), "hparams": module.hparams,
                            "epoch": epoch, "val_auc": val_auc}, args.out)
        else:
            bad_epochs += 1
            if bad_epochs >= patience:
                if rank == 0:
                    print(f"early stopping at epoch {epoch}", flush=True)
                break

    if rank == 0:
        print(f"best val_auc {best_auc:.4f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
