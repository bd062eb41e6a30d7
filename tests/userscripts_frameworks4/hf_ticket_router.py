"""Route customer-support tickets to one of four queues (tiny BERT + HF Trainer).

A word-level tokenizer is trained on the ticket corpus (main process first, the
others load it from disk), the model is built from a BertConfig, and training
runs under DDP with step-wise evaluation, checkpoint rotation, early stopping on
macro-F1 and best-model reloading.  Afterwards: a held-out test `predict`, a
per-queue report, `save_model`, and a reload of the exported model on every rank.

    torchrun --nproc-per-node 2 hf_ticket_router.py --epochs 4
"""
import argparse
import json
import os
from dataclasses import dataclass

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, classification_report, f1_score
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    EarlyStoppingCallback,
    PreTrainedTokenizerFast,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    set_seed,
)

from hfacc_common import TICKET_QUEUES, arm_watchdog, build_word_tokenizer, make_tickets, run_dir, say

SCRIPT = "hf_ticket_router"


@dataclass
class RunConfig:
    epochs: int = 4
    batch_size: int = 16
    lr: float = 3e-3
    hidden: int = 64
    layers: int = 2
    n_train: int = 768
    n_eval: int = 128
    n_test: int = 128
    seed: int = 13


def parse_args() -> RunConfig:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name, default in vars(RunConfig()).items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)
    return RunConfig(**vars(p.parse_args()))


class TicketDataset(torch.utils.data.Dataset):
    def __init__(self, rows, tokenizer):
        self.enc = tokenizer([r["text"] for r in rows], truncation=True)
        self.labels = [r["label"] for r in rows]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_ids": self.enc["input_ids"][i], "attention_mask": self.enc["attention_mask"][i],
                "labels": self.labels[i]}


def compute_metrics(eval_pred):
    preds = np.argmax(eval_pred.predictions, axis=-1)
    return {"accuracy": accuracy_score(eval_pred.label_ids, preds),
            "macro_f1": f1_score(eval_pred.label_ids, preds, average="macro")}


class MetricsHistory(TrainerCallback):
    """Keeps every evaluation in memory and writes them as JSON when training ends."""

    def __init__(self, path):
        self.path = path
        self.history = []

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self.history.append({"step": state.global_step, **{k: round(v, 4) for k, v in (metrics or {}).items()}})
        if state.is_world_process_zero:
            say(f"eval @ step {state.global_step}: acc={metrics['eval_accuracy']:.3f} "
                f"f1={metrics['eval_macro_f1']:.3f}")

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            with open(self.path, "w") as fh:
                json.dump({"history": self.history, "best": state.best_metric,
                           "best_checkpoint": state.best_model_checkpoint}, fh, indent=1)


def main():
    cfg = parse_args()
    out = run_dir(SCRIPT)
    arm_watchdog(80)
    set_seed(cfg.seed)

    args = TrainingArguments(
        output_dir=str(out / "checkpoints"),
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=32,
        learning_rate=cfg.lr,
        warmup_steps=10,
        weight_decay=0.01,
        eval_strategy="steps",
        eval_steps=12,
        save_strategy="steps",
        save_steps=12,
        save_total_limit=2,
        load_best_model_at_end=True,
        metric_for_best_model="macro_f1",
        logging_steps=6,
        report_to="none",
        use_cpu=True,
        ddp_backend="gloo",
        ddp_timeout=30,
        ddp_find_unused_parameters=False,
        dataloader_num_workers=0,
        seed=cfg.seed,
    )

    tok_dir = out / "tokenizer"
    rows = make_tickets(cfg.n_train + cfg.n_eval + cfg.n_test, seed=cfg.seed)
    train_rows, eval_rows, test_rows = (rows[: cfg.n_train], rows[cfg.n_train: cfg.n_train + cfg.n_eval],
                                        rows[cfg.n_train + cfg.n_eval:])
    with args.main_process_first(desc="train tokenizer"):
        if args.process_index == 0:
            build_word_tokenizer([r["text"] for r in train_rows], min_freq=2).save_pretrained(tok_dir)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(tok_dir)
    say(f"vocab={len(tokenizer)} train={len(train_rows)} eval={len(eval_rows)} test={len(test_rows)}")

    config = BertConfig(vocab_size=len(tokenizer), hidden_size=cfg.hidden, num_hidden_layers=cfg.layers,
                        num_attention_heads=4, intermediate_size=cfg.hidden * 2, max_position_embeddings=64,
                        num_labels=len(TICKET_QUEUES), pad_token_id=tokenizer.pad_token_id,
                        id2label=dict(enumerate(TICKET_QUEUES)), label2id={q: i for i, q in enumerate(TICKET_QUEUES)})
    model = BertForSequenceClassification(config)

    history = MetricsHistory(out / "eval_history.json")
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=TicketDataset(train_rows, tokenizer),
        eval_dataset=TicketDataset(eval_rows, tokenizer),
        data_collator=DataCollatorWithPadding(tokenizer, pad_to_multiple_of=8),
        processing_class=tokenizer,
        compute_metrics=compute_metrics,
        callbacks=[history, EarlyStoppingCallback(early_stopping_patience=3)],
    )
    result = trainer.train()
    trainer.save_metrics("train", result.metrics)

    pred = trainer.predict(TicketDataset(test_rows, tokenizer))
    trainer.save_metrics("test", pred.metrics)
    if trainer.is_world_process_zero():
        report = classification_report(pred.label_ids, pred.predictions.argmax(-1), target_names=TICKET_QUEUES,
                                       zero_division=0)
        (out / "test_report.txt").write_text(report)
        say(f"test accuracy {pred.metrics['test_accuracy']:.3f}, macro-F1 {pred.metrics['test_macro_f1']:.3f}")

    export = out / "export"
    trainer.save_model(str(export))
    trainer.accelerator.wait_for_everyone()
    reloaded = BertForSequenceClassification.from_pretrained(export)
    probe = tokenizer(["my parcel tracking says delivered but nothing arrived"], return_tensors="pt")
    with torch.no_grad():
        queue = TICKET_QUEUES[reloaded(**probe).logits.argmax(-1).item()]
    say(f"reloaded export ({sum(p.numel() for p in reloaded.parameters())} params), probe -> {queue}")

    trainer.accelerator.wait_for_everyone()
    if dist.is_initialized():
        dist.destroy_process_group()
    say("done")


if __name__ == "__main__":
    main()
