#!/usr/bin/env python
"""Causal-LM pretraining of a tiny GPT-2 on our news+books text dump (run_clm.py style).

Pre-processing (normalise -> tokenize -> group into blocks) runs on the main process
first and is cached to disk; the other ranks pick up the cache afterwards.

    torchrun --nproc-per-node 2 hf_clm_grouping.py
"""
import logging
import math
import os
import random
import re
import shutil
import unicodedata
from array import array
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    GPT2Config,
    GPT2LMHeadModel,
    HfArgumentParser,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
    default_data_collator,
)

logger = logging.getLogger("run_clm")

SUBJECTS = ["the river", "a railway", "the senate", "this album", "the species", "the castle",
            "the team", "a hurricane", "the novel", "the battalion", "the cathedral", "the band"]
VERBS = ["was built in", "was released in", "is found in", "was destroyed in", "was founded in",
         "was recorded in", "moved to", "was renamed in", "reached", "was first described in"]
OBJECTS = ["1887", "the north", "@-@ era", "london", "the early 1900s", "the valley", "paris",
           "the second season", "1954", "the coastal region", "the new capital", "the summer of 1969"]
_ws = re.compile(r"\s+")
_unk_marks = re.compile(r"\s@(.)@\s")


@dataclass
class DataTrainingArguments:
    cache_dir: str = field(default="/tmp/fw2_hf_clm/cache")
    corpus_lines: int = field(default=6_000_000, metadata={"help": "lines in the news+books training dump"})
    block_size: int = field(default=64)
    max_train_blocks: int = field(default=512)
    overwrite_cache: bool = field(default=True)
    corpus_seed: int = field(default=0)


@dataclass
class ModelArguments:
    n_embd: int = field(default=64)
    n_layer: int = field(default=2)
    n_head: int = field(default=2)


def iter_corpus(n_lines, seed):
    rng = random.Random(seed)
    for i in range(n_lines):
        if i % 13 == 0:
            yield " = = " + rng.choice(SUBJECTS).title() + " = = "
        else:
            yield " ".join([rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), ",",
                            rng.choice(SUBJECTS), rng.choice(VERBS), rng.choice(OBJECTS), "."])


def normalize(line):
    line = unicodedata.normalize("NFKC", line)
    line = _unk_marks.sub(r"\1", line)
    return _ws.sub(" ", line).strip().lower()


def build_tokenizer():
    vocab = {"<|endoftext|>": 0, "<unk>": 1}
    for phrase in SUBJECTS + VERBS + OBJECTS + [",", ".", "="]:
        for w in normalize(phrase).split():
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   unk_token="<unk>", pad_token="<|endoftext|>")


def tokenize_and_group(data_args, tokenizer):
    """Equivalent of run_clm's tokenize_function + group_texts, written to a torch cache."""
    cache_file = os.path.join(data_args.cache_dir, f"lm_blocks_{data_args.block_size}.pt")
    if os.path.exists(cache_file) and not data_args.overwrite_cache:
        return torch.load(cache_file)
    backend = tokenizer.backend_tokenizer
    ids = array("i")
    for n, line in enumerate(iter_corpus(data_args.corpus_lines, data_args.corpus_seed)):
        line = normalize(line)
        if not line or line.startswith("="):
            continue
        ids.extend(backend.encode(line).ids)
        ids.append(tokenizer.eos_token_id)
        if n and n % 500_000 == 0:
            logger.info("tokenized %d / %d lines", n, data_args.corpus_lines)
    total = (len(ids) // data_args.block_size) * data_args.block_size
    blocks = torch.tensor(ids[:total], dtype=torch.long).view(-1, data_args.block_size)
    os.makedirs(data_args.cache_dir, exist_ok=True)
    torch.save(blocks, cache_file)
    return blocks


class BlockDataset(torch.utils.data.Dataset):
    def __init__(self, blocks):
        self.blocks = blocks

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, i):
        x = self.blocks[i]
        return {"input_ids": x, "attention_mask": torch.ones_like(x), "labels": x.clone()}


def main():
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    model_args, data_args, training_args = HfArgumentParser(
        (ModelArguments, DataTrainingArguments, TrainingArguments)
    ).parse_args_into_dataclasses(args=[
        "--output_dir", "/tmp/fw2_hf_clm/gpt2-tiny",
        "--use_cpu", "true",
        "--per_device_train_batch_size", "16",
        "--per_device_eval_batch_size", "16",
        "--learning_rate", "1e-3",
        "--num_train_epochs", "1",
        "--eval_strategy", "epoch",
        "--save_strategy", "epoch",
        "--logging_steps", "5",
        "--report_to", "none",
        "--disable_tqdm", "true",
    ])
    logging.basicConfig(format="%(asctime)s - %(levelname)s - %(name)s - %(message)s", level=logging.INFO)
    logger.info("process rank %d, world size %d", training_args.process_index, training_args.world_size)
    if training_args.process_index == 0:
        shutil.rmtree(training_args.output_dir, ignore_errors=True)

    tokenizer = build_tokenizer()
    with training_args.main_process_first(desc="dataset map pre-processing"):
        blocks = tokenize_and_group(data_args, tokenizer)
    logger.info("%d blocks of %d tokens", len(blocks), data_args.block_size)

    g = torch.Generator().manual_seed(data_args.corpus_seed)
    perm = torch.randperm(len(blocks), generator=g)
    n_eval = max(len(blocks) // 50, 32)
    eval_ds = BlockDataset(blocks[perm[:n_eval]])
    train_ds = BlockDataset(blocks[perm[n_eval:n_eval + data_args.max_train_blocks]])

    config = GPT2Config(vocab_size=len(tokenizer), n_positions=data_args.block_size, n_embd=model_args.n_embd,
                        n_layer=model_args.n_layer, n_head=model_args.n_head,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id)
    model = GPT2LMHeadModel(config)
    trainer = Trainer(model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds,
                      data_collator=default_data_collator)
    trainer.train()
    metrics = trainer.evaluate()
    metrics["perplexity"] = math.exp(metrics["eval_loss"])
    trainer.log_metrics("eval", metrics)
    trainer.save_metrics("eval", metrics)
    trainer.save_model()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
