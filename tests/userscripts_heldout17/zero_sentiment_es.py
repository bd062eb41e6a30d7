"""Bag-of-words sentiment classifier, DDP + ZeroRedundancyOptimizer.

Reviews are synthesized from a fixed lexicon (some words carry polarity,
most are neutral) with a bit of label noise, so the model starts to overfit
after a handful of epochs -- that's what the early stopping is for.
"""
import argparse
import logging
import os
import shutil
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from es_tools import Checkpointer, EarlyStopping


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", default="/tmp/ho17_zero_sentiment")
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--review-len", type=int, default=40)
    p.add_argument("--n-train", type=int, default=4000)
    p.add_argument("--n-val", type=int, default=600)
    p.add_argument("--label-noise", type=float, default=0.1)
    p.add_argument("--epochs", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--patience", type=int, default=3)
    p.add_argument("--min-delta", type=float, default=1e-3)
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--seed", type=int, default=11)
    return p.parse_args()


def synth_reviews(n, vocab, length, noise, lexicon_seed, row_seed):
    """Reviews drawn from a fixed polarity lexicon; row_seed picks the rows."""
    g = torch.Generator().manual_seed(lexicon_seed)
    polarity = torch.zeros(vocab)
    polar_ids = torch.randperm(vocab, generator=g)[: vocab // 5]
    polarity[polar_ids] = torch.randn(len(polar_ids), generator=g).sign()
    g = torch.Generator().manual_seed(row_seed)
    tokens = torch.randint(vocab, (n, length), generator=g)
    score = polarity[tokens].sum(1) + 0.5 * torch.randn(n, generator=g)
    labels = (score > 0).long()
    flip = torch.rand(n, generator=g) < noise
    labels[flip] = 1 - labels[flip]
    return tokens, labels


class BowClassifier(nn.Module):
    def __init__(self, vocab, dim=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, 2))

    def forward(self, tokens):
        return self.mlp(self.emb(tokens))


@torch.no_grad()
def validate(model, loader):
    model.eval()
    loss_sum, correct, n = 0.0, 0, 0
    for tok, lab in loader:
        logits = model(tok)
        loss_sum += F.cross_entropy(logits, lab, reduction="sum").item()
        correct += (logits.argmax(1) == lab).sum().item()
        n += lab.numel()
    model.train()
    return loss_sum / n, correct / n


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s rank{rank} %(name)s: %(message)s")
    log = logging.getLogger("train")

    if rank == 0:
        shutil.rmtree(args.out, ignore_errors=True)
        os.makedirs(args.out)
    dist.barrier()

    torch.manual_seed(args.seed)
    tr_x, tr_y = synth_reviews(args.n_train, args.vocab, args.review_len, args.label_noise,
                               args.seed, args.seed + 1)
    va_x, va_y = synth_reviews(args.n_val, args.vocab, args.review_len, args.label_noise,
                               args.seed, args.seed + 2)

    train_ds, val_ds = TensorDataset(tr_x, tr_y), TensorDataset(va_x, va_y)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
    val_sampler = DistributedSampler(val_ds, shuffle=False)
    train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler)
    val_dl = DataLoader(val_ds, batch_size=256, sampler=val_sampler)

    model = DDP(BowClassifier(args.vocab))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW,
                                  lr=args.lr, weight_decay=1e-5)
    ckpt = Checkpointer(args.out, model, opt, writer_rank=0)
    stopper = EarlyStopping(patience=args.patience, min_delta=args.min_delta)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        t0, tot, nb = time.time(), 0.0, 0
        for tok, lab in train_dl:
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(tok), lab)
            loss.backward()
            opt.step()
            tot += loss.item()
            nb += 1
        val_loss, val_acc = validate(model, val_dl)
        improved = stopper.step(val_loss)
        log.info("epoch %02d train %.4f val %.4f acc %.3f%s (%.1fs)", epoch, tot / nb, val_loss,
                 val_acc, " *" if improved else "", time.time() - t0)
        if (epoch + 1) % args.ckpt_every == 0:
            ckpt.save(f"epoch{epoch:03d}", epoch=epoch, val_loss=val_loss)
        if stopper.should_stop:
            log.info("no improvement for %d epochs, stopping", args.patience)
            break

    ckpt.save("final", epoch=epoch, best_val=stopper.best)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
