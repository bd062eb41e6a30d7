#!/usr/bin/env python
"""Headline generation with a GRU encoder-decoder (Bahdanau-style attention) on Accelerate.

Config: acc_headline.yaml. Works with `python acc_headline_seq2seq.py` on a single box
for debugging, and with torchrun / accelerate launch for multi-process runs.

    torchrun --nproc-per-node 2 acc_headline_seq2seq.py
"""
import argparse
import logging
import os
import random
import shutil
from datetime import timedelta

import torch
import torch.nn.functional as F
import yaml
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, Dataset

log = logging.getLogger("headline")

PAD, BOS, EOS = 0, 1, 2
TOPICS = ["storm", "election", "merger", "vaccine", "strike", "launch", "trial", "record", "flood", "deal"]
PLACES = ["paris", "tokyo", "lagos", "lima", "oslo", "delhi", "cairo", "quito"]
ACTIONS = ["hits", "delays", "boosts", "ends", "sparks", "halts"]
FILLER = ["officials", "said", "on", "tuesday", "the", "a", "after", "reports", "that", "in", "local",
          "sources", "and", "while", "residents", "were", "told", "by", "according", "to"]


def setup_environment(dist_cfg):
    """Rendezvous settings for the process group (single-node runs)."""
    os.environ["MASTER_ADDR"] = dist_cfg["master_addr"]
    os.environ["MASTER_PORT"] = str(dist_cfg["master_port"])
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")


class Vocab:
    def __init__(self):
        self.itos = ["<pad>", "<s>", "</s>"] + TOPICS + PLACES + ACTIONS + FILLER
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def encode(self, words):
        return [self.stoi[w] for w in words]


class HeadlineDataset(Dataset):
    def __init__(self, n, seed, vocab, max_src, max_tgt):
        rng = random.Random(seed)
        self.pairs = []
        for _ in range(n):
            topic, place, action = rng.choice(TOPICS), rng.choice(PLACES), rng.choice(ACTIONS)
            body = [rng.choice(FILLER) for _ in range(rng.randint(8, max_src - 3))]
            for w in (topic, action, place):
                body.insert(rng.randrange(len(body) + 1), w)
            src = vocab.encode(body[:max_src])
            tgt = [BOS] + vocab.encode([place, topic, action])[: max_tgt - 2] + [EOS]
            self.pairs.append((src, tgt))

    def __len__(self):
        return len(self.pairs)

    def __getitem__(self, i):
        return self.pairs[i]


def collate(batch):
    src_len = max(len(s) for s, _ in batch)
    tgt_len = max(len(t) for _, t in batch)
    src = torch.full((len(batch), src_len), PAD)
    tgt = torch.full((len(batch), tgt_len), PAD)
    for i, (s, t) in enumerate(batch):
        src[i, : len(s)] = torch.tensor(s)
        tgt[i, : len(t)] = torch.tensor(t)
    return src, tgt


class Seq2Seq(nn.Module):
    def __init__(self, vocab_size, emb_dim, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb_dim, padding_idx=PAD)
        self.encoder = nn.GRU(emb_dim, hidden, batch_first=True, bidirectional=True)
        self.bridge = nn.Linear(2 * hidden, hidden)
        self.decoder = nn.GRUCell(emb_dim + 2 * hidden, hidden)
        self.attn = nn.Linear(hidden, 2 * hidden, bias=False)
        self.out = nn.Linear(hidden + 2 * hidden, vocab_size)

    def forward(self, src, tgt, teacher_forcing=1.0):
        enc, _ = self.encoder(self.emb(src))
        mask = src != PAD
        h = torch.tanh(self.bridge(enc.mean(1)))
        inp = tgt[:, 0]
        logits = []
        for t in range(1, tgt.size(1)):
            scores = torch.einsum("bh,bsh->bs", self.attn(h), enc).masked_fill(~mask, -1e9)
            ctx = torch.einsum("bs,bsh->bh", scores.softmax(-1), enc)
            h = self.decoder(torch.cat([self.emb(inp), ctx], -1), h)
            step_logits = self.out(torch.cat([h, ctx], -1))
            logits.append(step_logits)
            use_tf = random.random() < teacher_forcing
            inp = tgt[:, t] if use_tf else step_logits.argmax(-1)
        return torch.stack(logits, 1)


def evaluate(model, loader, accelerator):
    model.eval()
    correct = total = 0
    loss_sum = 0.0
    with torch.no_grad():
        for src, tgt in loader:
            logits = model(src, tgt, teacher_forcing=0.0)
            gold = tgt[:, 1:]
            loss_sum += F.cross_entropy(logits.transpose(1, 2), gold, ignore_index=PAD).item()
            keep = gold != PAD
            c = ((logits.argmax(-1) == gold) & keep).sum()
            n = keep.sum()
            c, n = accelerator.reduce(torch.stack([c, n]), reduction="sum")
            correct += c.item()
            total += n.item()
    model.train()
    return loss_sum / len(loader), correct / max(total, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "acc_headline.yaml"))
    cfg = yaml.safe_load(open(ap.parse_args().config))
    setup_environment(cfg["distributed"])

    pg_kwargs = InitProcessGroupKwargs(backend=cfg["distributed"]["backend"],
                                       timeout=timedelta(minutes=cfg["distributed"]["timeout_minutes"]))
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=cfg["train"]["grad_accum"],
                              kwargs_handlers=[pg_kwargs])
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s [proc {accelerator.process_index}] %(levelname)s %(message)s")
    set_seed(cfg["seed"])
    if accelerator.is_main_process:
        shutil.rmtree(cfg["output_dir"], ignore_errors=True)
    accelerator.wait_for_everyone()

    vocab = Vocab()
    d, m, t = cfg["data"], cfg["model"], cfg["train"]
    train_ds = HeadlineDataset(d["n_train"], cfg["seed"], vocab, d["max_src_len"], d["max_tgt_len"])
    val_ds = HeadlineDataset(d["n_val"], cfg["seed"] + 1, vocab, d["max_src_len"], d["max_tgt_len"])
    train_loader = DataLoader(train_ds, batch_size=t["batch_size"], shuffle=True, collate_fn=collate)
    val_loader = DataLoader(val_ds, batch_size=64, collate_fn=collate)
    model = Seq2Seq(len(vocab.itos), m["emb_dim"], m["hidden"])
    optimizer = torch.optim.Adam(model.parameters(), lr=t["lr"])
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)

    for epoch in range(t["epochs"]):
        for step, (src, tgt) in enumerate(train_loader):
            with accelerator.accumulate(model):
                logits = model(src, tgt, teacher_forcing=m["teacher_forcing"])
                loss = F.cross_entropy(logits.transpose(1, 2), tgt[:, 1:], ignore_index=PAD)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), t["clip"])
                optimizer.step()
                optimizer.zero_grad()
            if step % 5 == 0:
                log.info("epoch %d step %d loss %.4f", epoch, step, loss.item())
        val_loss, tok_acc = evaluate(model, val_loader, accelerator)
        log.info("epoch %d val_loss %.4f token_acc %.3f", epoch, val_loss, tok_acc)
        accelerator.save_state(os.path.join(cfg["output_dir"], f"epoch_{epoch}"))

    accelerator.wait_for_everyone()
    accelerator.save_model(model, os.path.join(cfg["output_dir"], "final"))
    accelerator.end_training()


if __name__ == "__main__":
    main()
