"""Review sentiment classifier with the Hugging Face Trainer (tiny BERT, CPU/gloo DDP).

Custom padding collator, sklearn compute_metrics, a JSONL logging callback,
early stopping on eval accuracy with checkpoint rotation, then a second run
that resumes from the last checkpoint, a final evaluate/predict, save_model
and a reload of the saved model on every rank after a barrier.

    torchrun --nproc-per-node 2 trainer_healthy.py
"""
import json
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, f1_score
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    EarlyStoppingCallback,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

from fw3_common import REVIEW_WORDS, WordVocab, arm_hang_watchdog, fresh_outdir, make_reviews, say

NAME = "trainer_healthy"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
LABEL2ID = {"negative": 0, "positive": 1}
MAX_LEN = 40


class ReviewDataset(torch.utils.data.Dataset):
    def __init__(self, rows, vocab):
        self.rows = rows
        self.vocab = vocab

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = self.rows[i]
        return {"input_ids": self.vocab.encode(row["text"], MAX_LEN, cls=True), "label": row["label"]}


class PadCollator:
    """Pads to the longest example of the batch and maps label strings to ids."""

    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, features):
        longest = max(len(f["input_ids"]) for f in features)
        input_ids = torch.full((len(features), longest), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(features), longest), dtype=torch.long)
        for i, f in enumerate(features):
            input_ids[i, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
            attention_mask[i, : len(f["input_ids"])] = 1
        labels = torch.tensor([LABEL2ID[f["label"]] for f in features])
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def compute_metrics(eval_pred):
    preds = np.argmax(eval_pred.predictions, axis=-1)
    labels = eval_pred.label_ids
    return {"accuracy": accuracy_score(labels, preds), "f1": f1_score(labels, preds)}


class JsonlLogCallback(TrainerCallback):
    """Appends every log/eval record to a JSONL file (main process only)."""

    def __init__(self, path):
        self.path = path

    def _write(self, state, kind, payload):
        if state.is_world_process_zero:
            with open(self.path, "a") as f:
                f.write(json.dumps({"kind": kind, "step": state.global_step, **payload}) + "\n")

    def on_log(self, args, state, control, logs=None, **kwargs):
        self._write(state, "log", logs or {})

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._write(state, "eval", metrics or {})

    def on_train_end(self, args, state, control, **kwargs):
        self._write(state, "train_end", {"best_checkpoint": state.best_model_checkpoint,
                                         "best_metric": state.best_metric})


def build_model(vocab):
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=2,
                        pad_token_id=vocab.pad_id)
    return BertForSequenceClassification(config)


def build_args(max_steps):
    return TrainingArguments(
        output_dir=str(OUT / "run"),
        max_steps=max_steps,
        per_device_train_batch_size=16,
        per_device_eval_batch_size=32,
        learning_rate=5e-3,
        warmup_steps=2,
        weight_decay=0.01,
        eval_strategy="steps",
        eval_steps=8,
        save_strategy="steps",
        save_steps=8,
        save_total_limit=2,
        load_best_model_at_end=True,
        metric_for_best_model="accuracy",
        greater_is_better=True,
        logging_steps=4,
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        ddp_timeout=30,
        seed=13,
        use_cpu=True,
    )


def main():
    t0 = time.time()
    set_seed(13)
    vocab = WordVocab(REVIEW_WORDS)
    train_ds = ReviewDataset(make_reviews(512, seed=1), vocab)
    eval_ds = ReviewDataset(make_reviews(96, seed=2), vocab)
    test_ds = ReviewDataset(make_reviews(64, seed=3), vocab)
    collator = PadCollator(vocab.pad_id)

    # ---- first run: 16 steps with evaluation / checkpoints every 8 steps
    args = build_args(max_steps=16)
    trainer = Trainer(model=build_model(vocab), args=args, train_dataset=train_ds, eval_dataset=eval_ds,
                      data_collator=collator, compute_metrics=compute_metrics,
                      callbacks=[JsonlLogCallback(OUT / "log.jsonl"),
                                 EarlyStoppingCallback(early_stopping_patience=3)])
    trainer.train()
    say("first run done, global_step", trainer.state.global_step)

    # ---- second run: resume from the newest checkpoint and train on to 32 steps
    last = get_last_checkpoint(str(OUT / "run"))
    say("resuming from", last)
    args = build_args(max_steps=32)
    trainer = Trainer(model=build_model(vocab), args=args, train_dataset=train_ds, eval_dataset=eval_ds,
                      data_collator=collator, compute_metrics=compute_metrics,
                      callbacks=[JsonlLogCallback(OUT / "log.jsonl"),
                                 EarlyStoppingCallback(early_stopping_patience=3)])
    trainer.train(resume_from_checkpoint=last)
    metrics = trainer.evaluate()
    pred = trainer.predict(test_ds)
    say(f"eval accuracy={metrics['eval_accuracy']:.3f} test accuracy={pred.metrics['test_accuracy']:.3f}")

    # ---- export and sanity-reload on every rank, after everybody is past the save
    final_dir = OUT / "final"
    trainer.save_model(str(final_dir))
    if trainer.is_world_process_zero():
        vocab.save(final_dir / "vocab.json")
        trainer.save_metrics("eval", metrics)
    trainer.accelerator.wait_for_everyone()
    reloaded = BertForSequenceClassification.from_pretrained(str(final_dir))
    say("reloaded model with", sum(p.numel() for p in reloaded.parameters()), "parameters")

    trainer.accelerator.wait_for_everyone()
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
