"""Tiny GPT-2 language model trained with 🤗 Accelerate from a JSON run config (CPU, gloo).

The run config carries the model/training hyper-parameters and an "env"
block that is exported before the Accelerator is created.  Training uses
gradient accumulation, save_state checkpoints every N optimizer steps,
accelerator.reduce for the logged loss and gather_for_metrics for the
validation perplexity.

    torchrun --nproc-per-node 2 accel_env_config_world_size.py
"""
import json
import math
import os
import random
import time
from datetime import timedelta

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "accel_lm_config.json")) as f:
    CFG = json.load(f)
os.environ.update(CFG["env"])  # thread / tokenizer settings for the workers

import torch
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset
from transformers import GPT2Config, GPT2LMHeadModel

from fw3_common import REVIEW_WORDS, WordVocab, arm_hang_watchdog, fresh_outdir, make_reviews, say

NAME = "accel_env_config_world_size"
OUT = fresh_outdir(NAME)
arm_hang_watchdog(60)


def build_blocks(vocab, n_reviews, block, seed):
    stream = []
    for r in make_reviews(n_reviews, seed):
        stream += [vocab.bos_id] + vocab.encode(r["text"]) + [vocab.eos_id]
    n = len(stream) // block
    return torch.tensor(stream[: n * block]).view(n, block)


def main():
    t0 = time.time()
    tc = CFG["train"]
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=tc["gradient_accumulation_steps"],
                              project_dir=str(OUT),
                              kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=30))])
    say(f"process {accelerator.process_index}/{accelerator.num_processes} on {accelerator.device}")
    set_seed(0)
    random.seed(0)

    vocab = WordVocab(REVIEW_WORDS)
    train_blocks = build_blocks(vocab, 600, tc["block_size"], seed=1)
    val_blocks = build_blocks(vocab, 120, tc["block_size"], seed=2)
    train_dl = DataLoader(TensorDataset(train_blocks), batch_size=tc["batch_size"], shuffle=True)
    val_dl = DataLoader(TensorDataset(val_blocks), batch_size=tc["batch_size"])

    config = GPT2Config(vocab_size=len(vocab), bos_token_id=vocab.bos_id, eos_token_id=vocab.eos_id,
                        **CFG["model"])
    model = GPT2LMHeadModel(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=tc["lr"])
    model, optimizer, train_dl, val_dl = accelerator.prepare(model, optimizer, train_dl, val_dl)

    step = 0
    for epoch in range(tc["epochs"]):
        model.train()
        for (x,) in train_dl:
            with accelerator.accumulate(model):
                loss = model(input_ids=x, labels=x).loss
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                step += 1
                if step % tc["checkpoint_every"] == 0:
                    accelerator.save_state(str(OUT / f"checkpoint-{step}"))
        mean_loss = accelerator.reduce(loss.detach(), reduction="mean")

        model.eval()
        losses = []
        for (x,) in val_dl:
            with torch.no_grad():
                out = model(input_ids=x, labels=x)
            losses.append(accelerator.gather_for_metrics(out.loss.repeat(x.shape[0])))
        ppl = math.exp(torch.cat(losses).mean().item())
        accelerator.print(f"epoch {epoch}: train_loss={mean_loss.item():.3f} val_ppl={ppl:.2f}")

    accelerator.wait_for_everyone()
    accelerator.save_model(model, str(OUT / "final"))
    accelerator.end_training()
    say(f"done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
