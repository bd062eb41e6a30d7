"""Review polarity with a tiny BERT and a plain 🤗 Accelerate training loop.

Reviews are split into train/validation, a word-level tokenizer is trained on
the training split (rare words -> [UNK]), and a BertForSequenceClassification
is built from a config.  The loop uses accelerate's prepare / backward /
accumulate / gather_for_metrics, applies word-dropout augmentation to the
training batches, and saves the model + tokenizer at the end.

    torchrun --nproc-per-node 2 acc_review_bert.py --epochs 3
"""
import argparse
import json
import random
from datetime import timedelta

import torch
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import set_seed
from sklearn.metrics import f1_score
from sklearn.model_selection import train_test_split
from torch.utils.data import DataLoader
from transformers import BertConfig, BertForSequenceClassification, DataCollatorWithPadding, get_linear_schedule_with_warmup

from hfacc_common import arm_watchdog, build_word_tokenizer, make_reviews, run_dir, say

SCRIPT = "acc_review_bert"


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--n-reviews", type=int, default=1600)
    p.add_argument("--val-fraction", type=float, default=0.15)
    p.add_argument("--min-freq", type=int, default=2)
    p.add_argument("--word-dropout", type=float, default=0.05)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--seed", type=int, default=11)
    return p.parse_args()


class ReviewSet(torch.utils.data.Dataset):
    """Encoded reviews; with word_dropout > 0 random tokens are replaced by [UNK] (training augmentation)."""

    def __init__(self, rows, tokenizer, word_dropout=0.0):
        self.enc = tokenizer([r["text"] for r in rows], truncation=True, max_length=40)
        self.labels = [r["label"] for r in rows]
        self.word_dropout = word_dropout
        self.unk_id = tokenizer.unk_token_id
        self.special = set(tokenizer.all_special_ids)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        ids = list(self.enc["input_ids"][i])
        if self.word_dropout:
            ids = [self.unk_id if t not in self.special and random.random() < self.word_dropout else t for t in ids]
        return {"input_ids": ids, "attention_mask": self.enc["attention_mask"][i], "labels": self.labels[i]}


def load_corpus(n):
    """All reviews of the current dump (deterministic: the dump is a fixed file in production)."""
    rows = make_reviews(n, seed=2024, n_brands=1500)
    seen, unique = set(), []
    for r in rows:
        if r["text"] not in seen:
            seen.add(r["text"])
            unique.append(r)
    return unique


@torch.no_grad()
def evaluate(accelerator, model, loader):
    model.eval()
    preds, labels, losses = [], [], []
    for batch in loader:
        out = model(**batch)
        p, y, l = accelerator.gather_for_metrics((out.logits.argmax(-1), batch["labels"], out.loss.reshape(1)))
        preds.append(p)
        labels.append(y)
        losses.append(l)
    model.train()
    preds, labels = torch.cat(preds).numpy(), torch.cat(labels).numpy()
    return {"val_loss": torch.cat(losses).mean().item(), "val_acc": float((preds == labels).mean()),
            "val_f1": f1_score(labels, preds)}


def main():
    args = parse()
    out = run_dir(SCRIPT)
    arm_watchdog(75)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=args.accum,
                              kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    # each process gets its own random stream, so the word-dropout augmentation differs between processes
    set_seed(args.seed, device_specific=True)

    rows = load_corpus(args.n_reviews)
    train_rows, val_rows = train_test_split(rows, test_size=args.val_fraction,
                                            stratify=[r["label"] for r in rows])
    tokenizer = build_word_tokenizer([r["text"] for r in train_rows], min_freq=args.min_freq, model_max_length=40)
    say(f"{len(train_rows)} train / {len(val_rows)} val reviews, vocab size {len(tokenizer)}")

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=128, max_position_embeddings=48, num_labels=2,
                        pad_token_id=tokenizer.pad_token_id)
    model = BertForSequenceClassification(config)
    collate = DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8)
    train_dl = DataLoader(ReviewSet(train_rows, tokenizer, args.word_dropout), batch_size=args.batch_size, shuffle=True,
                          collate_fn=collate)
    val_dl = DataLoader(ReviewSet(val_rows, tokenizer), batch_size=64, collate_fn=collate)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    total = args.epochs * len(train_dl) // accelerator.num_processes
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=total // 10, num_training_steps=total)

    model, optimizer, train_dl, val_dl, scheduler = accelerator.prepare(model, optimizer, train_dl, val_dl, scheduler)

    history = []
    for epoch in range(args.epochs):
        for step, batch in enumerate(train_dl):
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if step % 10 == 0 and accelerator.is_main_process:
                say(f"epoch {epoch} step {step} loss {loss.item():.4f}")
        metrics = evaluate(accelerator, model, val_dl)
        history.append({"epoch": epoch, **metrics})
        if accelerator.is_main_process:
            say(f"epoch {epoch}: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items()))

    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save_pretrained(out / "model", save_function=accelerator.save)
        tokenizer.save_pretrained(out / "model")
        (out / "history.json").write_text(json.dumps(history, indent=1))
    accelerator.end_training()
    say("done")


if __name__ == "__main__":
    main()
