"""Review sentiment classifier trained from CSV files with the Hugging Face Trainer (CPU, gloo).

Tokenisation is cached under main_process_first, a custom collator pads the
batch and maps label names to ids, compute_metrics reports accuracy/F1, and a
callback keeps a metrics history and flags the best evaluation so far.

    torchrun --nproc-per-node 2 trainer_collator_keyerror.py
"""
import csv
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, f1_score
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainerCallback, TrainingArguments

from fw3_common import REVIEW_WORDS, WordVocab, arm_hang_watchdog, fresh_outdir, say

NAME = "trainer_collator_keyerror"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
HERE = os.path.dirname(os.path.abspath(__file__))
LABEL2ID = {"negative": 0, "positive": 1}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def tokenize_file(path, vocab, cache):
    if not os.path.exists(cache):
        rows = [{"id": r["review_id"], "input_ids": vocab.encode(r["text"], 48, cls=True), "label": r["label"]}
                for r in read_csv(path)]
        with open(cache, "w") as f:
            json.dump(rows, f)
    with open(cache) as f:
        return json.load(f)


class ListDataset(torch.utils.data.Dataset):
    def __init__(self, rows):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


class ReviewCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, features):
        n = max(len(f["input_ids"]) for f in features)
        ids = torch.full((len(features), n), self.pad_id)
        mask = torch.zeros((len(features), n), dtype=torch.long)
        for i, f in enumerate(features):
            ids[i, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
            mask[i, : len(f["input_ids"])] = 1
        labels = torch.tensor([LABEL2ID[f["label"]] for f in features])
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def compute_metrics(p):
    preds = p.predictions.argmax(-1)
    return {"accuracy": accuracy_score(p.label_ids, preds), "f1": f1_score(p.label_ids, preds)}


class MetricsHistory(TrainerCallback):
    def __init__(self, path):
        self.path = path
        self.best = None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero or not metrics:
            return
        is_best = self.best is None or metrics["eval_accuracy"] > self.best
        self.best = metrics["eval_accuracy"] if is_best else self.best
        with open(self.path, "a") as f:
            f.write(json.dumps({"step": state.global_step, "best": is_best, **metrics}) + "\n")


def main():
    t0 = time.time()
    args = TrainingArguments(
        output_dir=str(OUT / "run"),
        max_steps=12,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=8,
        learning_rate=5e-3,
        eval_strategy="steps",
        eval_steps=6,
        save_strategy="steps",
        save_steps=6,
        logging_steps=3,
        report_to="none",
        disable_tqdm=True,
        remove_unused_columns=False,
        ddp_timeout=30,
        seed=5,
        use_cpu=True,
    )
    vocab = WordVocab(REVIEW_WORDS)
    with args.main_process_first(desc="tokenize csv"):
        train_rows = tokenize_file(os.path.join(HERE, "reviews_train.csv"), vocab, OUT / "train.tok.json")
        dev_rows = tokenize_file(os.path.join(HERE, "reviews_dev.csv"), vocab, OUT / "dev.tok.json")
    say(f"{len(train_rows)} train / {len(dev_rows)} dev reviews")

    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2,
                        id2label={v: k for k, v in LABEL2ID.items()}, label2id=LABEL2ID)
    trainer = Trainer(model=BertForSequenceClassification(config), args=args,
                      train_dataset=ListDataset(train_rows), eval_dataset=ListDataset(dev_rows),
                      data_collator=ReviewCollator(vocab.pad_id), compute_metrics=compute_metrics,
                      callbacks=[MetricsHistory(OUT / "metrics.jsonl")])
    trainer.train()
    metrics = trainer.evaluate()
    say(f"final eval accuracy {metrics['eval_accuracy']:.3f}")
    trainer.save_model(str(OUT / "final"))
    trainer.accelerator.wait_for_everyone()
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
