#!/usr/bin/env python
"""News-topic classification (world/sports/business/sci_tech) with a class-weighted loss.

The topic distribution in the export is skewed (sci_tech is ~10%), so the Trainer is
subclassed to use inverse-frequency class weights + label smoothing in the loss.

    torchrun --nproc-per-node 2 hf_topic_weighted_loss.py
"""
import logging
import os
import shutil
from dataclasses import dataclass, field
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import f1_score
from tokenizers import Tokenizer, models, pre_tokenizers
from torch import nn
from transformers import (
    DataCollatorWithPadding,
    HfArgumentParser,
    PreTrainedTokenizerFast,
    RobertaConfig,
    RobertaForSequenceClassification,
    Trainer,
    TrainingArguments,
)

import topic_data

logger = logging.getLogger(__name__)


@dataclass
class DataArgs:
    work_dir: str = field(default="/tmp/fw2_hf_topic")
    num_articles: int = field(default=640)
    val_fraction: float = field(default=0.15)
    max_length: int = field(default=24)
    labels: str = field(default="world,sports,business,sci_tech")


@dataclass
class ModelArgs:
    hidden_size: int = field(default=64)
    num_layers: int = field(default=2)
    num_heads: int = field(default=4)
    label_smoothing: float = field(default=0.05)


class WeightedLossTrainer(Trainer):
    def __init__(self, *args, class_weights=None, label_smoothing=0.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.class_weights = class_weights
        self.label_smoothing = label_smoothing

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        logits = outputs.logits
        loss_fct = nn.CrossEntropyLoss(
            weight=self.class_weights.to(logits.device), label_smoothing=self.label_smoothing
        )
        loss = loss_fct(logits.view(-1, logits.size(-1)), labels.view(-1))
        return (loss, outputs) if return_outputs else loss


def build_tokenizer(rows):
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for r in rows:
        for w in (r["title"] + " . " + r["body"]).split():
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>", unk_token="<unk>")


def compute_metrics(p):
    preds = np.argmax(p.predictions, axis=-1)
    return {"accuracy": float((preds == p.label_ids).mean()),
            "macro_f1": float(f1_score(p.label_ids, preds, average="macro"))}


def main():
    # gloo for the CPU nodes; TrainingArguments picks up the existing process group
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    data_args, model_args, training_args = HfArgumentParser(
        (DataArgs, ModelArgs, TrainingArguments)
    ).parse_args_into_dataclasses(args=[
        "--output_dir", "/tmp/fw2_hf_topic/checkpoints",
        "--use_cpu", "true",
        "--learning_rate", "1e-3",
        "--num_train_epochs", "2",
        "--per_device_train_batch_size", "16",
        "--per_device_eval_batch_size", "32",
        "--eval_strategy", "epoch",
        "--save_strategy", "epoch",
        "--logging_steps", "5",
        "--seed", "1234",
        "--report_to", "none",
        "--disable_tqdm", "true",
    ])
    logging.basicConfig(format=f"%(asctime)s [rank{os.environ.get('RANK', '0')}] %(levelname)s %(name)s - %(message)s",
                        level=logging.INFO)

    export_path = os.path.join(data_args.work_dir, "export", "articles.jsonl")
    if dist.get_rank() == 0:
        shutil.rmtree(data_args.work_dir, ignore_errors=True)
        topic_data.write_synthetic_export(export_path, data_args.num_articles, seed=5)
    dist.barrier()

    label_names = data_args.labels.split(",")
    rows = topic_data.read_export(export_path)
    train_rows, val_rows = topic_data.train_val_split(rows, data_args.val_fraction, seed=0)
    weights = topic_data.inverse_frequency_weights(train_rows, len(label_names))
    logger.info("train=%d val=%d class weights=%s", len(train_rows), len(val_rows), weights.tolist())

    tok = build_tokenizer(rows)
    config = RobertaConfig(
        vocab_size=tok.vocab_size, hidden_size=model_args.hidden_size,
        num_hidden_layers=model_args.num_layers, num_attention_heads=model_args.num_heads,
        intermediate_size=model_args.hidden_size * 4, max_position_embeddings=data_args.max_length + 4,
        pad_token_id=tok.pad_token_id, num_labels=len(label_names),
        id2label=dict(enumerate(label_names)), label2id={n: i for i, n in enumerate(label_names)},
    )
    model = RobertaForSequenceClassification(config)

    trainer = WeightedLossTrainer(
        model=model,
        args=training_args,
        train_dataset=topic_data.ArticleDataset(train_rows, tok, data_args.max_length),
        eval_dataset=topic_data.ArticleDataset(val_rows, tok, data_args.max_length),
        data_collator=DataCollatorWithPadding(tok),
        compute_metrics=compute_metrics,
        class_weights=weights,
        label_smoothing=model_args.label_smoothing,
    )
    train_out = trainer.train()
    trainer.log_metrics("train", train_out.metrics)
    eval_metrics = trainer.evaluate()
    trainer.log_metrics("eval", eval_metrics)
    trainer.save_model()
    if trainer.is_world_process_zero():
        tok.save_pretrained(training_args.output_dir)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
