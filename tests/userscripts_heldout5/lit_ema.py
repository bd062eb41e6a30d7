"""Intent classifier: Lightning-style module driven by a small hand-written loop (EMA + accumulation-free).

torchrun --nproc-per-node 2 lit_ema.py
"""
import argparse
import copy
import json
import logging
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
logger = logging.getLogger(__name__)


class JsonlDataset(Dataset):
    def __init__(self, path):
        with open(path) as f:
            self.recs = [json.loads(l) for l in f]

    def __len__(self):
        return len(self.recs)

    def __getitem__(self, i):
        r = self.recs[i]
        return torch.tensor(r["input_ids"]), torch.tensor(r["label"])


class IntentModule(nn.Module):
    """Mirrors a LightningModule: training_step / validation_step / configure_optimizers."""

    def __init__(self, vocab_size=1000, dim=96, n_classes=6, lr=2e-3):
        super().__init__()
        self.hparams = dict(vocab_size=vocab_size, dim=dim, n_classes=n_classes, lr=lr)
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.conv = nn.Conv1d(dim, dim, kernel_size=3, padding=1)
        self.norm = nn.LayerNorm(dim)
        self.cls = nn.Linear(dim, n_classes)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).float()
        h = self.embed(ids)
        h = F.gelu(self.conv(h.transpose(1, 2))).transpose(1, 2)
        h = (h * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.cls(self.norm(h))

    def training_step(self, batch, model=None):
        ids, y = batch
        logits = (model or self)(ids)
        return F.cross_entropy(logits, y, label_smoothing=0.05)

    def validation_step(self, batch, model=None):
        ids, y = batch
        logits = (model or self)(ids)
        return F.cross_entropy(logits, y, reduction="sum"), (logits.argmax(-1) == y).sum()

    def configure_optimizers(self, total_steps):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams["lr"], weight_decay=0.05)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=self.hparams["lr"], total_steps=total_steps)
        return opt, sched


class EMA:
    def __init__(self, model, decay=0.995):
        self.decay = decay
        self.shadow = copy.deepcopy(model).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, model):
        for s, p in zip(self.shadow.parameters(), model.parameters()):
            s.mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--pg-timeout", type=int, default=10)
    args = ap.parse_args()

    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s rank{rank} %(levelname)s %(message)s")
    torch.manual_seed(1234)
    torch.set_num_threads(1)

    train_ds = JsonlDataset(os.path.join(HERE, "data", "train.jsonl"))
    val_ds = JsonlDataset(os.path.join(HERE, "data", "valid.jsonl"))
    train_sampler = DistributedSampler(train_ds, shuffle=False)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler, num_workers=1)
    val_dl = DataLoader(val_ds, batch_size=64, sampler=DistributedSampler(val_ds, shuffle=False))

    module = IntentModule()
    model = DDP(module)
    ema = EMA(module)
    opt, sched = module.configure_optimizers(total_steps=args.epochs * len(train_dl))

    step, skipped = 0, 0
    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        window = torch.zeros(2)
        for batch in train_dl:
            try:
                loss = module.training_step(batch, model=model)
            except Exception as e:  # a few malformed batches should not kill a multi-hour run
                skipped += 1
                logger.warning("skipping batch at step %d (%s: %s)", step, type(e).__name__, e)
                continue
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            ema.update(module)
            step += 1
            window += torch.tensor([loss.item(), 1.0])
            if step % args.log_every == 0:
                dist.all_reduce(window)
                if rank == 0:
                    logger.info("epoch %d step %d loss %.4f lr %.2e", epoch, step,
                                (window[0] / window[1]).item(), sched.get_last_lr()[0])
                window.zero_()

        # validate the EMA weights
        tot = torch.zeros(3)
        with torch.no_grad():
            for batch in val_dl:
                l, c = module.validation_step(batch, model=ema.shadow)
                tot += torch.tensor([l.item(), c.item(), len(batch[1])])
        dist.all_reduce(tot)
        if rank == 0:
            logger.info("epoch %d ema val_loss %.4f val_acc %.3f skipped=%d",
                        epoch, tot[0] / tot[2], tot[1] / tot[2], skipped)

    if rank == 0:
        torch.save({"model": module.state_dict(), "ema": ema.shadow.state_dict()},
                   os.path.join(HERE, "intent_ema.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
