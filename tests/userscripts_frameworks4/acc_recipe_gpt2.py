"""Tiny GPT-2 language model on recipe instructions, trained with 🤗 Accelerate.

Dataclass config, a word-level tokenizer trained on the corpus, block packing of
the token stream, AdamW + cosine schedule, gradient accumulation, periodic
validation perplexity via gather_for_metrics, save_state checkpoints and a
JSONL metrics file written by the main process.

    torchrun --nproc-per-node 2 acc_recipe_gpt2.py
"""
import json
import math
import time
from dataclasses import asdict, dataclass
from datetime import timedelta

import torch
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import ProjectConfiguration, set_seed
from torch.utils.data import DataLoader, Dataset
from transformers import GPT2Config, GPT2LMHeadModel, get_cosine_schedule_with_warmup

from hfacc_common import arm_watchdog, build_word_tokenizer, make_recipe_lines, run_dir, say

SCRIPT = "acc_recipe_gpt2"


@dataclass
class Config:
    n_lines: int = 3000
    block_size: int = 32
    batch_size: int = 16
    grad_accum: int = 2
    lr: float = 2e-3
    epochs: int = 2
    n_embd: int = 64
    n_layer: int = 2
    log_every: int = 10
    eval_every: int = 40
    seed: int = 5


class PackedBlocks(Dataset):
    """Concatenate all token ids and cut them into fixed-size blocks (run_clm style)."""

    def __init__(self, ids, block_size):
        n = (len(ids) // block_size) * block_size
        self.blocks = torch.tensor(ids[:n], dtype=torch.long).view(-1, block_size)

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, i):
        return {"input_ids": self.blocks[i], "labels": self.blocks[i]}


class MetricsLog:
    """Main-process JSONL log of training metrics with the loss averaged over all processes."""

    def __init__(self, accelerator, path):
        self.accelerator = accelerator
        self.path = path
        self.t0 = time.time()

    def log_train(self, step, loss, lr):
        global_loss = self.accelerator.reduce(loss.detach().clone(), reduction="mean").item()
        rec = {"step": step, "loss": round(global_loss, 4), "ppl": round(math.exp(min(global_loss, 20)), 2),
               "lr": lr, "elapsed": round(time.time() - self.t0, 2)}
        with open(self.path, "a") as fh:
            fh.write(json.dumps(rec) + "\n")
        say(f"step {step}: loss={rec['loss']} ppl={rec['ppl']}")


@torch.no_grad()
def validate(accelerator, model, loader):
    model.eval()
    losses = []
    for batch in loader:
        loss = model(**batch).loss
        losses.append(accelerator.gather_for_metrics(loss.reshape(1)))
    model.train()
    mean = torch.cat(losses).mean().item()
    return mean, math.exp(mean)


def main():
    cfg = Config()
    out = run_dir(SCRIPT)
    arm_watchdog(75)
    accelerator = Accelerator(
        cpu=True, gradient_accumulation_steps=cfg.grad_accum,
        project_config=ProjectConfiguration(project_dir=str(out), automatic_checkpoint_naming=True, total_limit=1),
        kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))],
    )
    set_seed(cfg.seed)
    lines = make_recipe_lines(cfg.n_lines, seed=cfg.seed)
    split = int(0.9 * len(lines))
    tokenizer = build_word_tokenizer(lines[:split], model_max_length=10_000)
    enc = lambda ls: [t for l in ls for t in tokenizer(l)["input_ids"]]  # noqa: E731
    train_ds = PackedBlocks(enc(lines[:split]), cfg.block_size)
    val_ds = PackedBlocks(enc(lines[split:]), cfg.block_size)
    say(f"vocab {len(tokenizer)}, {len(train_ds)} train blocks, {len(val_ds)} val blocks")

    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=cfg.block_size, n_embd=cfg.n_embd,
                                       n_layer=cfg.n_layer, n_head=4, bos_token_id=tokenizer.cls_token_id,
                                       eos_token_id=tokenizer.sep_token_id))
    train_dl = DataLoader(train_ds, batch_size=cfg.batch_size, shuffle=True)
    val_dl = DataLoader(val_ds, batch_size=32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=0.1, betas=(0.9, 0.95))
    updates = cfg.epochs * math.ceil(len(train_dl) / accelerator.num_processes / cfg.grad_accum)
    scheduler = get_cosine_schedule_with_warmup(optimizer, num_warmup_steps=5, num_training_steps=updates)
    model, optimizer, train_dl, val_dl, scheduler = accelerator.prepare(model, optimizer, train_dl, val_dl,
                                                                        scheduler)
    metrics = MetricsLog(accelerator, out / "metrics.jsonl")
    if accelerator.is_main_process:
        (out / "config.json").write_text(json.dumps(asdict(cfg), indent=1))

    step = 0
    for epoch in range(cfg.epochs):
        for batch in train_dl:
            with accelerator.accumulate(model):
                loss = model(**batch).loss
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            step += 1
            if accelerator.is_main_process and step % cfg.log_every == 0:
                metrics.log_train(step, loss, scheduler.get_last_lr()[0])
            if step % cfg.eval_every == 0:
                val_loss, val_ppl = validate(accelerator, model, val_dl)
                if accelerator.is_main_process:
                    say(f"step {step}: val_loss={val_loss:.4f} val_ppl={val_ppl:.2f}")
        accelerator.save_state()
        say(f"epoch {epoch} done, checkpoint saved")

    accelerator.wait_for_everyone()
    accelerator.save_model(model, out / "model")
    if accelerator.is_main_process:
        tokenizer.save_pretrained(out / "model")
    accelerator.end_training()
    say("done")


if __name__ == "__main__":
    main()
