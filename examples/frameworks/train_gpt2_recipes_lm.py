"""Train a tiny GPT-2 on synthetic recipe steps with the HF Trainer.

Besides the regular validation split we keep a small held-out "unseen dishes"
split and report its perplexity once per epoch.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 train_gpt2_recipes_lm.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import math
import random
import tempfile
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.utils.data import Dataset
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments


@dataclass
class RunConfig:
    output_dir: str = field(default_factory=lambda: os.path.join(tempfile.gettempdir(), "gpt2-recipes"))
    n_train: int = 192
    n_valid: int = 48
    n_holdout: int = 32
    block_size: int = 24
    epochs: int = 2
    batch_size: int = 8
    lr: float = 2e-3
    seed: int = 7
    dist_timeout_s: int = 30


VERBS = ["chop", "stir", "bake", "boil", "fry", "mix", "season", "grill", "whisk", "slice"]
INGREDIENTS = ["onion", "garlic", "tomato", "rice", "flour", "egg", "butter", "pepper", "basil", "lemon"]
SEEN_DISHES = ["soup", "risotto", "omelette", "pasta", "curry"]
UNSEEN_DISHES = ["tart", "stew"]
TOOLS = ["pan", "pot", "oven", "bowl", "grill"]


class WordTokenizer:
    """Word-level tokenizer over a fixed, hand-written vocabulary."""

    specials = ["<pad>", "<bos>", "<eos>", "<unk>"]

    def __init__(self):
        words = VERBS + INGREDIENTS + SEEN_DISHES + UNSEEN_DISHES + TOOLS + ["the", "in", "a", "for", "then", "and", "."]
        self.itos = self.specials + sorted(set(words))
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.pad_id, self.bos_id, self.eos_id, self.unk_id = 0, 1, 2, 3

    def __call__(self, text, block_size):
        ids = [self.bos_id] + [self.stoi.get(w, self.unk_id) for w in text.split()] + [self.eos_id]
        ids = ids[:block_size]
        mask = [1] * len(ids) + [0] * (block_size - len(ids))
        ids = ids + [self.pad_id] * (block_size - len(ids))
        return ids, mask


def recipe_line(rng, dishes):
    dish = rng.choice(dishes)
    steps = []
    for _ in range(rng.randint(2, 3)):
        steps.append(f"{rng.choice(VERBS)} the {rng.choice(INGREDIENTS)} in a {rng.choice(TOOLS)}")
    return f"for the {dish} " + " then ".join(steps) + " ."


class RecipeDataset(Dataset):
    def __init__(self, n, dishes, tok, block_size, seed):
        rng = random.Random(seed)
        self.examples = []
        for _ in range(n):
            ids, mask = tok(recipe_line(rng, dishes), block_size)
            labels = [i if m else -100 for i, m in zip(ids, mask)]
            self.examples.append(
                {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "labels": torch.tensor(labels)}
            )

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


class HoldoutPerplexityCallback(TrainerCallback):
    """Reports perplexity on the unseen-dishes split at the end of every epoch."""

    def __init__(self, holdout_dataset):
        self.holdout_dataset = holdout_dataset
        self.trainer = None
        self.history = []

    def on_epoch_end(self, args, state, control, **kwargs):
        # only one copy of the number is needed, so keep it to the main process
        if state.is_world_process_zero:
            metrics = self.trainer.evaluate(eval_dataset=self.holdout_dataset, metric_key_prefix="holdout")
            ppl = math.exp(min(metrics["holdout_loss"], 20))
            self.history.append(ppl)
            print(f"epoch {state.epoch:.0f}: holdout perplexity {ppl:.2f}", flush=True)


def main(cfg: RunConfig):
    torch.manual_seed(cfg.seed)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=cfg.dist_timeout_s))

    tok = WordTokenizer()
    train_ds = RecipeDataset(cfg.n_train, SEEN_DISHES, tok, cfg.block_size, seed=cfg.seed)
    valid_ds = RecipeDataset(cfg.n_valid, SEEN_DISHES, tok, cfg.block_size, seed=cfg.seed + 1)
    holdout_ds = RecipeDataset(cfg.n_holdout, UNSEEN_DISHES, tok, cfg.block_size, seed=cfg.seed + 2)

    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tok.itos),
            n_positions=cfg.block_size,
            n_embd=48,
            n_layer=2,
            n_head=2,
            bos_token_id=tok.bos_id,
            eos_token_id=tok.eos_id,
            pad_token_id=tok.pad_id,
        )
    )
    args = TrainingArguments(
        output_dir=cfg.output_dir,
        use_cpu=True,
        num_train_epochs=cfg.epochs,
        per_device_train_batch_size=cfg.batch_size,
        per_device_eval_batch_size=16,
        learning_rate=cfg.lr,
        warmup_steps=2,
        eval_strategy="epoch",
        save_strategy="no",
        logging_steps=5,
        report_to=[],
        seed=cfg.seed,
        ddp_timeout=cfg.dist_timeout_s,
        disable_tqdm=True,
    )
    holdout_cb = HoldoutPerplexityCallback(holdout_ds)
    trainer = Trainer(model=model, args=args, train_dataset=train_ds, eval_dataset=valid_ds, callbacks=[holdout_cb])
    holdout_cb.trainer = trainer

    trainer.train()
    if trainer.is_world_process_zero():
        trainer.save_model(os.path.join(cfg.output_dir, "final"))
        print("holdout perplexity per epoch:", [round(p, 2) for p in holdout_cb.history], flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main(RunConfig())
