"""News-topic classification with a tiny BERT in a plain PyTorch loop driven by Accelerate.

Launch (CPU, 2 processes):
    python -m torch.distributed.run --nproc-per-node 2 accelerate_news_topic_classifier.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import random
import shutil
import tempfile
from datetime import timedelta

import torch
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import ProjectConfiguration, set_seed
from sklearn.metrics import accuracy_score, f1_score
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification, get_linear_schedule_with_warmup

TOPICS = {
    "sports": ["match", "goal", "team", "coach", "league", "score", "season"],
    "markets": ["stocks", "bank", "rates", "shares", "investors", "profit", "inflation"],
    "science": ["study", "cells", "space", "telescope", "climate", "species", "lab"],
}
COMMON = ["the", "a", "new", "report", "says", "after", "week", "today", "on", "in"]


def build_split(n, seed, max_len, vocab):
    rng = random.Random(seed)
    topics = sorted(TOPICS)
    ids, labels = [], []
    for _ in range(n):
        y = rng.randrange(len(topics))
        words = rng.sample(TOPICS[topics[y]], 3) + rng.sample(COMMON, 4)
        rng.shuffle(words)
        row = [vocab[w] for w in words][:max_len]
        ids.append(row + [0] * (max_len - len(row)))
        labels.append(y)
    ids = torch.tensor(ids)
    return TensorDataset(ids, (ids != 0).long(), torch.tensor(labels))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--project-dir", default=os.path.join(tempfile.gettempdir(), "news-topics-accelerate"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--grad-accum", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=int, default=60)
    return p.parse_args()


def evaluate(accelerator, model, loader):
    model.eval()
    preds, refs = [], []
    for input_ids, attention_mask, labels in loader:
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        p, r = accelerator.gather_for_metrics((logits.argmax(-1), labels))
        preds.append(p.cpu())
        refs.append(r.cpu())
    preds, refs = torch.cat(preds).numpy(), torch.cat(refs).numpy()
    model.train()
    return {"accuracy": accuracy_score(refs, preds), "macro_f1": f1_score(refs, preds, average="macro")}


def main():
    args = parse_args()
    accelerator = Accelerator(
        cpu=True,
        gradient_accumulation_steps=args.grad_accum,
        project_config=ProjectConfiguration(
            project_dir=args.project_dir, automatic_checkpoint_naming=True, total_limit=2
        ),
        kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=args.timeout))],
    )
    set_seed(args.seed)

    with accelerator.main_process_first():
        if accelerator.is_main_process and os.path.isdir(args.project_dir):
            shutil.rmtree(args.project_dir)
    accelerator.wait_for_everyone()

    vocab = {w: i + 1 for i, w in enumerate(sorted({w for ws in TOPICS.values() for w in ws} | set(COMMON)))}
    train_ds = build_split(384, seed=1, max_len=12, vocab=vocab)
    eval_ds = build_split(90, seed=2, max_len=12, vocab=vocab)  # 90 is not divisible by 2*16 on purpose
    train_loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=True)
    eval_loader = DataLoader(eval_ds, batch_size=args.batch_size)

    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=len(vocab) + 1,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=16,
            num_labels=len(TOPICS),
        )
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    steps = args.epochs * len(train_loader) // (args.grad_accum * accelerator.num_processes)
    scheduler = get_linear_schedule_with_warmup(optimizer, num_warmup_steps=2, num_training_steps=steps)
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    best_f1 = -1.0
    for epoch in range(args.epochs):
        total = torch.zeros((), device=accelerator.device)
        for input_ids, attention_mask, labels in train_loader:
            with accelerator.accumulate(model):
                loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            total += loss.detach()
        mean_loss = accelerator.reduce(total, reduction="mean").item() / len(train_loader)
        metrics = evaluate(accelerator, model, eval_loader)
        accelerator.print(f"epoch {epoch}: train_loss={mean_loss:.4f} {metrics}")

        accelerator.save_state()
        if metrics["macro_f1"] > best_f1:
            best_f1 = metrics["macro_f1"]
            accelerator.wait_for_everyone()
            if accelerator.is_main_process:
                accelerator.unwrap_model(model).save_pretrained(
                    os.path.join(args.project_dir, "best"), save_function=accelerator.save
                )

    accelerator.wait_for_everyone()
    accelerator.print(f"done, best macro_f1={best_f1:.3f}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
