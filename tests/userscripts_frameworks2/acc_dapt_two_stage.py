#!/usr/bin/env python
"""Two-stage job on Accelerate:

  stage 1  domain-adaptive pretraining of a bag-of-words encoder (predict a held-out
           token from the rest of the review, tied input/output embeddings)
  stage 2  fine-tune a sentiment classifier on top of the exported encoder

The stage-1 encoder is exported to work_dir/export so the downstream jobs can reuse
it; stage 2 of this job warm-starts from the same export.

    torchrun --nproc-per-node 2 acc_dapt_two_stage.py --config acc_dapt.yaml
"""
import argparse
import gzip
import logging
import os
import shutil
import time
from datetime import timedelta

import torch
import torch.nn.functional as F
import yaml
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.logging import get_logger
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logger = get_logger("dapt")


class BowEncoder(nn.Module):
    def __init__(self, vocab_size, dim, dropout):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, dim, padding_idx=0)
        self.proj = nn.Linear(dim, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, ids):
        mask = (ids != 0).unsqueeze(-1).float()
        pooled = (self.emb(ids) * mask).sum(1) / mask.sum(1).clamp(min=1)
        return torch.tanh(self.proj(self.drop(pooled)))


class PretrainModel(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, ids, target):
        h = self.encoder(ids)
        logits = h @ self.encoder.emb.weight.t()
        return F.cross_entropy(logits, target)


class Classifier(nn.Module):
    def __init__(self, encoder, num_labels):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.proj.out_features, num_labels)

    def forward(self, ids):
        return self.head(self.encoder(ids))


def synthetic_reviews(n, vocab_size, seq_len, seed, with_labels):
    g = torch.Generator().manual_seed(seed)
    # zipf-ish token distribution, sentiment carried by two small token ranges
    ranks = torch.arange(1, vocab_size, dtype=torch.float)
    probs = 1.0 / ranks
    ids = torch.multinomial(probs / probs.sum(), n * seq_len, replacement=True, generator=g).view(n, seq_len) + 1
    labels = torch.randint(0, 2, (n,), generator=g)
    cue = torch.where(labels == 1, torch.randint(100, 150, (n,), generator=g),
                      torch.randint(150, 200, (n,), generator=g))
    ids[:, 0] = cue
    lengths = torch.randint(seq_len // 2, seq_len + 1, (n,), generator=g)
    ids[torch.arange(seq_len).unsqueeze(0) >= lengths.unsqueeze(1)] = 0
    if with_labels:
        return TensorDataset(ids, labels)
    target = ids[:, 1].clone()
    ids[:, 1] = 0
    return TensorDataset(ids, target)


def export_encoder(encoder, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with gzip.open(path, "wb") as f:
        torch.save(encoder.state_dict(), f)


def wait_for_file(path, poll_seconds, timeout):
    start = time.time()
    while not os.path.exists(path):
        if time.time() - start > timeout:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(poll_seconds)


def load_encoder_state(path):
    with gzip.open(path, "rb") as f:
        return torch.load(f, map_location="cpu")


def pretrain(cfg, accelerator):
    d, e, p = cfg["data"], cfg["encoder"], cfg["pretrain"]
    ds = synthetic_reviews(d["n_pretrain"], d["vocab_size"], d["seq_len"], cfg["seed"], with_labels=False)
    loader = DataLoader(ds, batch_size=p["batch_size"], shuffle=True)
    model = PretrainModel(BowEncoder(d["vocab_size"], e["dim"], e["dropout"]))
    opt = torch.optim.Adam(model.parameters(), lr=p["lr"])
    model, opt, loader = accelerator.prepare(model, opt, loader)
    model.train()
    step = 0
    while step < p["steps"]:
        for ids, target in loader:
            loss = model(ids, target)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
            step += 1
            logger.info("pretrain step %d loss %.4f", step, loss.item())
            if step >= p["steps"]:
                break
    return accelerator.unwrap_model(model).encoder


def finetune(cfg, accelerator, encoder):
    d, f = cfg["data"], cfg["finetune"]
    train = synthetic_reviews(d["n_finetune"], d["vocab_size"], d["seq_len"], cfg["seed"] + 1, with_labels=True)
    val = synthetic_reviews(d["n_eval"], d["vocab_size"], d["seq_len"], cfg["seed"] + 2, with_labels=True)
    model = Classifier(encoder, f["num_labels"])
    opt = torch.optim.AdamW(model.parameters(), lr=f["lr"])
    train_loader = DataLoader(train, batch_size=f["batch_size"], shuffle=True)
    val_loader = DataLoader(val, batch_size=64)
    model, opt, train_loader, val_loader = accelerator.prepare(model, opt, train_loader, val_loader)
    for epoch in range(f["epochs"]):
        model.train()
        for ids, y in train_loader:
            loss = F.cross_entropy(model(ids), y)
            accelerator.backward(loss)
            opt.step()
            opt.zero_grad()
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for ids, y in val_loader:
                pred, y = accelerator.gather_for_metrics((model(ids).argmax(-1), y))
                correct += (pred == y).sum().item()
                total += y.numel()
        logger.info("finetune epoch %d loss %.4f val_acc %.3f", epoch, loss.item(), correct / total)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "acc_dapt.yaml"))
    cfg = yaml.safe_load(open(ap.parse_args().config))

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    set_seed(cfg["seed"])
    work = cfg["work_dir"]
    if accelerator.is_main_process:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
    accelerator.wait_for_everyone()

    # ---- stage 1
    encoder = pretrain(cfg, accelerator)
    export_path = os.path.join(work, cfg["export"]["path"])
    if accelerator.is_main_process:
        t0 = time.time()
        export_encoder(encoder, export_path)
        logger.info("exported encoder to %s (%.1fs)", export_path, time.time() - t0)
    else:
        # exporting can be slow on the shared FS; poll for it instead of holding a collective open
        wait_for_file(export_path, cfg["export"]["poll_seconds"], cfg["export"]["wait_timeout"])
    accelerator.free_memory()

    # ---- stage 2: every rank warm-starts from the exported encoder
    d, e = cfg["data"], cfg["encoder"]
    encoder = BowEncoder(d["vocab_size"], e["dim"], e["dropout"])
    encoder.load_state_dict(load_encoder_state(export_path))
    model = finetune(cfg, accelerator, encoder)

    accelerator.wait_for_everyone()
    accelerator.save_model(model, os.path.join(work, "classifier"))
    accelerator.end_training()


if __name__ == "__main__":
    main()
