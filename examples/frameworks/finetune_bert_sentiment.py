"""Fine-tune a small BERT on a toy sentiment set with the HF Trainer (CPU, DDP).

Launch:
    python -m torch.distributed.run --nproc-per-node 2 finetune_bert_sentiment.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse
import random
import tempfile
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, f1_score
from torch.utils.data import Dataset
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    EarlyStoppingCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

POSITIVE = ["great", "good", "lovely", "excellent", "fun", "superb", "nice"]
NEGATIVE = ["bad", "awful", "boring", "poor", "terrible", "dull", "weak"]
SUBJECTS = ["the movie", "the plot", "the acting", "the ending", "the music", "the cast"]
FILLERS = ["really", "quite", "very", "so", "rather", "honestly"]


def make_corpus(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.randint(0, 1)
        word = rng.choice(POSITIVE if label else NEGATIVE)
        text = f"{rng.choice(SUBJECTS)} was {rng.choice(FILLERS)} {word}"
        if rng.random() < 0.3:
            text += f" and {rng.choice(FILLERS)} {rng.choice(POSITIVE if label else NEGATIVE)}"
        rows.append((text, label))
    return rows


class WordVocab:
    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.split()})
        self.itos = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode(self, text, max_len):
        ids = [2] + [self.stoi.get(w, 1) for w in text.split()][: max_len - 2] + [3]
        mask = [1] * len(ids)
        pad = max_len - len(ids)
        return ids + [0] * pad, mask + [0] * pad


class SentimentDataset(Dataset):
    def __init__(self, rows, vocab, max_len=16):
        self.items = []
        for text, label in rows:
            ids, mask = vocab.encode(text, max_len)
            self.items.append(
                {
                    "input_ids": torch.tensor(ids),
                    "attention_mask": torch.tensor(mask),
                    "labels": torch.tensor(label),
                }
            )

    def __len__(self):
        return len(self.items)

    def __getitem__(self, idx):
        return self.items[idx]


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    preds = np.argmax(logits, axis=-1)
    return {
        "accuracy": accuracy_score(labels, preds),
        "f1": f1_score(labels, preds, average="macro"),
    }


class PrintMetricsCallback(TrainerCallback):
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if state.is_world_process_zero and metrics:
            shown = {k: round(v, 4) for k, v in metrics.items() if isinstance(v, float)}
            print(f"[epoch {state.epoch:.0f}] eval {shown}", flush=True)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--output-dir", default=os.path.join(tempfile.gettempdir(), "bert-sentiment"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--ddp-timeout", type=int, default=60)
    return p.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)
    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.ddp_timeout))

    train_rows = make_corpus(256, seed=1)
    eval_rows = make_corpus(64, seed=2)
    vocab = WordVocab([t for t, _ in train_rows + eval_rows])
    train_ds = SentimentDataset(train_rows, vocab)
    eval_ds = SentimentDataset(eval_rows, vocab)

    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
    )
    model = BertForSequenceClassification(config)

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        use_cpu=True,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=32,
        learning_rate=args.lr,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=1,
        load_best_model_at_end=True,
        metric_for_best_model="f1",
        logging_steps=4,
        report_to=[],
        seed=args.seed,
        ddp_timeout=args.ddp_timeout,
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        compute_metrics=compute_metrics,
        callbacks=[EarlyStoppingCallback(early_stopping_patience=2), PrintMetricsCallback()],
    )
    trainer.train()
    metrics = trainer.evaluate()
    trainer.save_model(os.path.join(args.output_dir, "final"))
    if trainer.is_world_process_zero():
        print(f"final eval f1={metrics['eval_f1']:.3f} acc={metrics['eval_accuracy']:.3f}", flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
