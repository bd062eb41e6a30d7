"""Lightning-style module driven by a hand-written DDP loop, with EMA weights.

Rank 0 fetches the dataset from the first reachable mirror (local dirs here),
verifies it, and the rest of the ranks wait for it.
"""
import argparse
import copy
import hashlib
import logging
import os
import shutil
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
MIRRORS = [os.path.join(HERE, "mirror_eu"), os.path.join(HERE, "mirror_us")]
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("train")


def fetch_dataset(dest, retries=2):
    """Copy digits.npz from the first mirror that has a valid copy."""
    for mirror in MIRRORS:
        for attempt in range(retries):
            try:
                src = os.path.join(mirror, "digits.npz")
                with open(os.path.join(mirror, "digits.npz.sha256")) as f:
                    want = f.read().split()[0]
                tmp = dest + ".part"
                shutil.copyfile(src, tmp)
                got = hashlib.sha256(open(tmp, "rb").read()).hexdigest()
                if got != want:
                    raise IOError(f"checksum mismatch from {mirror}")
                os.replace(tmp, dest)
                return mirror
            except OSError as e:
                log.warning("fetch from %s failed (attempt %d): %r", mirror, attempt + 1, e)
                time.sleep(0.5 * (attempt + 1))
    raise RuntimeError("no mirror could provide the dataset")


class LitClassifier(nn.Module):
    def __init__(self, n_in, n_classes, lr=2e-3):
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(n_in, 128), nn.ReLU(), nn.Dropout(0.1),
                                 nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, n_classes))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, model=None):
        x, y = batch
        logits = (model or self)(x)
        return F.cross_entropy(logits, y, label_smoothing=0.05)

    @torch.no_grad()
    def validation_step(self, batch):
        x, y = batch
        logits = self(x)
        return F.cross_entropy(logits, y, reduction="sum").item(), (logits.argmax(1) == y).sum().item()

    def configure_optimizers(self, params):
        opt = torch.optim.AdamW(params, lr=self.lr)
        return opt, torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=50)


class EMA:
    def __init__(self, module, decay=0.99):
        self.shadow = copy.deepcopy(module).eval()
        self.decay = decay
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module):
        for s, p in zip(self.shadow.parameters(), module.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    os.makedirs(os.path.join(HERE, "data"), exist_ok=True)
    local = os.path.join(HERE, "data", "digits.npz")

    # rank 0 downloads, everybody else waits, then rank 0 tells them where it came from
    meta = [None]
    if rank == 0:
        mirror = fetch_dataset(local)
        meta = [{"mirror": os.path.basename(mirror), "fetched_at": time.time()}]
    dist.barrier()
    dist.broadcast_object_list(meta, src=0)
    log.info("[rank %d] dataset from %s", rank, meta[0]["mirror"])

    data = np.load(local)
    x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"]).long()
    n_val = len(x) // 10
    train_ds = TensorDataset(x[n_val:], y[n_val:])
    val_ds = TensorDataset(x[:n_val], y[:n_val])
    sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
    loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=sampler)

    torch.manual_seed(0)
    lit = LitClassifier(x.shape[1], int(y.max()) + 1)
    model = DDP(lit)
    opt, sched = lit.configure_optimizers(model.parameters())
    ema = EMA(lit)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        model.train()
        seen = 0
        for batch in loader:
            loss = lit.training_step(batch, model=model)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            ema.update(lit)
            seen += len(batch[1])
        sched.step()
        counts = [None] * world
        dist.all_gather_object(counts, {"rank": rank, "seen": seen, "last_loss": round(loss.item(), 4)})
        if rank == 0:
            tot_loss = tot_ok = 0.0
            for vb in DataLoader(val_ds, batch_size=256):
                l, ok = LitClassifier.validation_step(ema.shadow, vb)
                tot_loss += l
                tot_ok += ok
            log.info("epoch %d per-rank %s | ema val loss %.4f acc %.3f", epoch, counts,
                     tot_loss / len(val_ds), tot_ok / len(val_ds))

    dist.barrier()
    if rank == 0:
        torch.save(ema.shadow.state_dict(), os.path.join(HERE, "data", "ema.pt"))
        log.info("saved EMA weights")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
