"""Supervised fine-tuning of a tiny GPT-2 with the Hugging Face Trainer (CPU, gloo DDP).

Prompt tokens are masked with -100 so only the answer is trained on; the SFT
mix is a curriculum (short chat turns, then document-QA, then a mixed tail),
so it is consumed in order.  A Trainer subclass skips batches that carry no
supervised token (their loss would be 0/0), a callback adds perplexity to the
eval metrics, and the run ends with evaluate + save_model.

    torchrun --nproc-per-node 2 trainer_skip_empty_batch.py
"""
import math
import os
import random
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch
import torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments, set_seed
from transformers.utils import logging

from fw3_common import WordVocab, arm_hang_watchdog, fresh_outdir, say

NAME = "trainer_skip_empty_batch"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)
MAX_LEN = 24
logger = logging.get_logger(NAME)
logging.set_verbosity_warning()

OBJECTS = {"sky": "blue", "grass": "green", "snow": "white", "coal": "black", "banana": "yellow",
           "tomato": "red", "orange": "orange", "cloud": "grey", "leaf": "green", "blood": "red"}
OPPOSITES = {"hot": "cold", "big": "small", "fast": "slow", "up": "down", "open": "closed",
             "early": "late", "light": "dark", "happy": "sad", "old": "new", "full": "empty"}
FILLER = ("the report describes the village market and the old bridge near the river where "
          "people meet every morning to trade fruit bread and cloth before the long walk home").split()
WORDS = (["question", ":", "answer", "context", "what", "color", "is", "the", "opposite", "of", "?"]
         + list(OBJECTS) + list(OBJECTS.values()) + list(OPPOSITES) + list(OPPOSITES.values()) + FILLER)


def chat_example(rng):
    if rng.random() < 0.5:
        obj = rng.choice(list(OBJECTS))
        return {"prompt": f"question : what color is the {obj} ? answer :", "completion": OBJECTS[obj]}
    w = rng.choice(list(OPPOSITES))
    return {"prompt": f"question : what is the opposite of {w} ? answer :", "completion": OPPOSITES[w]}


def docqa_example(rng):
    obj = rng.choice(list(OBJECTS))
    context = " ".join(FILLER)
    return {"prompt": f"context : {context} question : what color is the {obj} ? answer :",
            "completion": OBJECTS[obj]}


def build_sft_mix(seed=0):
    """Curriculum order: 20 chat warm-up turns, a block of 4 document-QA turns, 40 mixed chat turns."""
    rng = random.Random(seed)
    return ([chat_example(rng) for _ in range(20)] + [docqa_example(rng) for _ in range(4)]
            + [chat_example(rng) for _ in range(40)])


class SFTDataset(torch.utils.data.Dataset):
    def __init__(self, rows, vocab):
        self.items = []
        for r in rows:
            p = [vocab.bos_id] + vocab.encode(r["prompt"])
            c = vocab.encode(r["completion"]) + [vocab.eos_id]
            ids = (p + c)[:MAX_LEN]  # right truncation, like tokenizer(truncation=True)
            labels = ([-100] * len(p) + c)[:MAX_LEN]
            self.items.append({"input_ids": ids, "labels": labels})

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


class SFTCollator:
    def __init__(self, pad_id):
        self.pad_id = pad_id

    def __call__(self, features):
        n = max(len(f["input_ids"]) for f in features)
        batch = {"input_ids": torch.full((len(features), n), self.pad_id),
                 "attention_mask": torch.zeros((len(features), n), dtype=torch.long),
                 "labels": torch.full((len(features), n), -100)}
        for i, f in enumerate(features):
            k = len(f["input_ids"])
            batch["input_ids"][i, :k] = torch.tensor(f["input_ids"])
            batch["attention_mask"][i, :k] = 1
            batch["labels"][i, :k] = torch.tensor(f["labels"])
        return batch


class SFTTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.skipped_batches = 0

    def training_step(self, model, inputs, num_items_in_batch=None):
        # A batch whose answers were all cut off by truncation has no supervised
        # token: its loss is 0/0 = NaN and would poison AdamW's moments. Skip it.
        if (inputs["labels"] != -100).sum().item() == 0:
            self.skipped_batches += 1
            logger.warning(f"[rank{self.args.process_index}] step {self.state.global_step}: "
                           f"batch has no supervised tokens, skipping it")
            return torch.tensor(0.0, device=self.args.device)
        return super().training_step(model, inputs, num_items_in_batch)


class PerplexityCallback(TrainerCallback):
    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if metrics and "eval_loss" in metrics:
            metrics["eval_perplexity"] = math.exp(min(metrics["eval_loss"], 20.0))


def main():
    t0 = time.time()
    set_seed(3)
    vocab = WordVocab(WORDS)
    train_ds = SFTDataset(build_sft_mix(seed=0), vocab)
    eval_ds = SFTDataset([chat_example(random.Random(100 + i)) for i in range(32)], vocab)

    config = GPT2Config(vocab_size=len(vocab), n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        bos_token_id=vocab.bos_id, eos_token_id=vocab.eos_id, pad_token_id=vocab.pad_id)
    model = GPT2LMHeadModel(config)

    args = TrainingArguments(
        output_dir=str(OUT / "run"),
        num_train_epochs=1,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=8,
        train_sampling_strategy="sequential",  # keep the curriculum order
        learning_rate=3e-3,
        logging_steps=2,
        eval_strategy="no",
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        remove_unused_columns=False,
        ddp_timeout=30,
        seed=3,
        use_cpu=True,
    )
    trainer = SFTTrainer(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds,
                         data_collator=SFTCollator(vocab.pad_id), callbacks=[PerplexityCallback()])
    trainer.train()
    metrics = trainer.evaluate()
    say(f"skipped {trainer.skipped_batches} batches; eval perplexity {metrics['eval_perplexity']:.2f}")
    trainer.save_model(str(OUT / "final"))
    trainer.accelerator.wait_for_everyone()
    if dist.is_initialized():
        dist.destroy_process_group()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
