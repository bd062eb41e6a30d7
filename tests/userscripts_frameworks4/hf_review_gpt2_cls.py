"""Product-review polarity with a tiny GPT-2 classifier and the HF Trainer.

GPT2ForSequenceClassification is built from a GPT2Config; the tokenizer is a
word-level one trained on the reviews.  Besides the usual metrics, a callback
keeps a fixed panel of hand-picked reviews and, after every evaluation, writes
the model's current predictions for them to a JSONL "prediction table" so we
can watch how individual examples move during training (the pattern from the
W&B / HF docs for logging sample predictions).

    torchrun --nproc-per-node 2 hf_review_gpt2_cls.py --max-steps 60
"""
import argparse
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
from sklearn.metrics import accuracy_score, precision_recall_fscore_support
from transformers import (
    DataCollatorWithPadding,
    GPT2Config,
    GPT2ForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from hfacc_common import arm_watchdog, build_word_tokenizer, make_reviews, run_dir, say

SCRIPT = "hf_review_gpt2_cls"
PANEL = [
    "the kettle was broken after a week and i returned it",
    "really love this backpack very sturdy and comfortable",
    "cheap flimsy charger was useless",
    "excellent lamp fast delivery beautiful",
    "the keyboard is slow and i am disappointed",
    "perfect headphones i recommend them",
]


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--max-steps", type=int, default=60)
    p.add_argument("--eval-every", type=int, default=15)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--n-embd", type=int, default=64)
    p.add_argument("--n-layer", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    return p.parse_args()


class EncodedDataset(torch.utils.data.Dataset):
    def __init__(self, texts, labels, tokenizer, max_length=48):
        self.enc = tokenizer(texts, truncation=True, max_length=max_length)
        self.labels = labels

    def __len__(self):
        return len(self.enc["input_ids"])

    def __getitem__(self, i):
        item = {"input_ids": self.enc["input_ids"][i], "attention_mask": self.enc["attention_mask"][i]}
        if self.labels is not None:
            item["labels"] = self.labels[i]
        return item


def compute_metrics(eval_pred):
    preds = eval_pred.predictions.argmax(-1)
    p, r, f, _ = precision_recall_fscore_support(eval_pred.label_ids, preds, average="binary", zero_division=0)
    return {"accuracy": accuracy_score(eval_pred.label_ids, preds), "precision": p, "recall": r, "f1": f}


class PredictionTableCallback(TrainerCallback):
    """After each evaluation, predict on a small fixed panel and append the rows to a table."""

    def __init__(self, trainer, panel_texts, tokenizer, path):
        self.trainer = trainer
        self.panel_texts = panel_texts
        self.panel = EncodedDataset(panel_texts, None, tokenizer)
        self.path = path

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if not state.is_world_process_zero:
            return
        out = self.trainer.predict(self.panel, metric_key_prefix="panel")
        probs = torch.softmax(torch.from_numpy(out.predictions), dim=-1)[:, 1].tolist()
        with open(self.path, "a") as fh:
            for text, p_pos in zip(self.panel_texts, probs):
                fh.write(json.dumps({"step": state.global_step, "text": text, "p_positive": round(p_pos, 4)}) + "\n")
        say(f"step {state.global_step}: eval acc={metrics.get('eval_accuracy', float('nan')):.3f}, "
            f"panel table -> {self.path.name}")


def main():
    a = get_args()
    out = run_dir(SCRIPT)
    arm_watchdog(80)
    set_seed(a.seed)

    rows = make_reviews(1400, seed=a.seed)
    train, dev = rows[:1200], rows[1200:]
    tokenizer = build_word_tokenizer([r["text"] for r in train], min_freq=3, model_max_length=48)
    say(f"vocab {len(tokenizer)}; train {len(train)}, dev {len(dev)}")

    config = GPT2Config(vocab_size=len(tokenizer), n_positions=64, n_embd=a.n_embd, n_layer=a.n_layer, n_head=4,
                        num_labels=2, pad_token_id=tokenizer.pad_token_id)
    model = GPT2ForSequenceClassification(config)

    args = TrainingArguments(
        output_dir=str(out / "run"),
        max_steps=a.max_steps,
        per_device_train_batch_size=a.batch_size,
        per_device_eval_batch_size=50,
        learning_rate=a.lr,
        lr_scheduler_type="cosine",
        warmup_steps=5,
        eval_strategy="steps",
        eval_steps=a.eval_every,
        save_strategy="no",
        logging_steps=5,
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        ddp_timeout=30,
        ddp_find_unused_parameters=False,
        seed=a.seed,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=EncodedDataset([r["text"] for r in train], [r["label"] for r in train], tokenizer),
        eval_dataset=EncodedDataset([r["text"] for r in dev], [r["label"] for r in dev], tokenizer),
        data_collator=DataCollatorWithPadding(tokenizer),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
    )
    trainer.add_callback(PredictionTableCallback(trainer, PANEL, tokenizer, out / "panel_predictions.jsonl"))

    trainer.train()
    final = trainer.evaluate()
    if trainer.is_world_process_zero():
        say("final dev metrics:", {k: round(v, 4) for k, v in final.items() if isinstance(v, float)})
        trainer.save_model(str(out / "model"))
        tokenizer.save_pretrained(out / "model")
    trainer.accelerator.wait_for_everyone()
    trainer.accelerator.end_training()
    say("done")


if __name__ == "__main__":
    main()
