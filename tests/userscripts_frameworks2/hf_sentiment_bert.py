#!/usr/bin/env python
"""Fine-tune a small BERT for binary sentiment (SST-2 style) with the HF Trainer.

We don't have hub access on the cluster nodes, so the tokenizer is a WordLevel
tokenizer built from the training vocabulary and the model is initialised from a
config. The corpus is a synthetic stand-in for our review dump (same label balance).

    torchrun --nproc-per-node 2 hf_sentiment_bert.py --epochs 2
"""
import argparse
import logging
import os
import random
import shutil
from dataclasses import asdict, dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    DataCollatorWithPadding,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
    set_seed,
)

logger = logging.getLogger("sst2-bert")

POSITIVE = ["great", "wonderful", "moving", "funny", "brilliant", "charming", "sharp", "delightful"]
NEGATIVE = ["dull", "boring", "awful", "messy", "tedious", "flat", "clumsy", "lifeless"]
FILLER = ["the", "film", "movie", "plot", "acting", "was", "is", "a", "really", "story",
          "cast", "script", "and", "but", "quite", "overall", "director", "scenes"]


@dataclass
class RunConfig:
    output_dir: str = "/tmp/fw2_hf_sentiment_bert"
    num_train: int = 384
    num_eval: int = 96
    max_length: int = 32
    hidden_size: int = 64
    num_layers: int = 2
    num_heads: int = 2
    learning_rate: float = 2e-3
    epochs: int = 3
    batch_size: int = 16
    seed: int = 13


def parse_args() -> RunConfig:
    cfg = RunConfig()
    p = argparse.ArgumentParser()
    for k, v in asdict(cfg).items():
        p.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v)
    return RunConfig(**vars(p.parse_args()))


def make_reviews(n, seed):
    rng = random.Random(seed)
    texts, labels = [], []
    for _ in range(n):
        label = rng.randint(0, 1)
        words = rng.sample(FILLER, rng.randint(4, 10))
        cue = POSITIVE if label else NEGATIVE
        for _ in range(rng.randint(1, 3)):
            words.insert(rng.randrange(len(words) + 1), rng.choice(cue))
        texts.append(" ".join(words))
        labels.append(label)
    return texts, labels


def build_tokenizer(texts):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    for t in texts:
        for w in t.split():
            vocab.setdefault(w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
    )


class ReviewDataset(torch.utils.data.Dataset):
    def __init__(self, texts, labels, tokenizer, max_length):
        self.enc = tokenizer(texts, truncation=True, max_length=max_length)
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        item = {k: v[i] for k, v in self.enc.items()}
        item["labels"] = self.labels[i]
        return item


def compute_metrics(eval_pred):
    logits, labels = eval_pred
    preds = np.argmax(logits, axis=-1)
    return {"accuracy": float((preds == labels).mean())}


def main():
    cfg = parse_args()
    logging.basicConfig(
        level=logging.INFO,
        format=f"%(asctime)s [rank{os.environ.get('RANK', 0)}] %(name)s: %(message)s",
    )
    # gloo on CPU; Trainer's ddp_timeout isn't forwarded for CPU runs so set it here
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    if dist.get_rank() == 0 and os.path.isdir(cfg.output_dir):
        shutil.rmtree(cfg.output_dir)
    dist.barrier()

    set_seed(cfg.seed)
    train_texts, train_labels = make_reviews(cfg.num_train, cfg.seed)
    eval_texts, eval_labels = make_reviews(cfg.num_eval, cfg.seed + 1)
    tokenizer = build_tokenizer(train_texts + eval_texts)

    model = BertForSequenceClassification(BertConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads,
        intermediate_size=cfg.hidden_size * 2, max_position_embeddings=64, num_labels=2,
    ))

    args = TrainingArguments(
        output_dir=cfg.output_dir,
        use_cpu=True,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=cfg.batch_size,
        learning_rate=cfg.learning_rate,
        num_train_epochs=cfg.epochs,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=1,
        logging_steps=4,
        report_to="none",
        disable_tqdm=True,
        seed=cfg.seed,
        dataloader_num_workers=0,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=ReviewDataset(train_texts, train_labels, tokenizer, cfg.max_length),
        eval_dataset=ReviewDataset(eval_texts, eval_labels, tokenizer, cfg.max_length),
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )
    result = trainer.train()
    metrics = trainer.evaluate()
    logger.info("train loss %.4f | eval %s", result.training_loss, metrics)
    trainer.save_model(os.path.join(cfg.output_dir, "final"))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(os.path.join(cfg.output_dir, "final"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
