"""Tiny GPT-2 trained on synthetic support-chat turns with Accelerate, with checkpoint/resume.

The token cache is built once by the main process (others wait), training runs
in two stages and the second stage resumes from the state saved by the first.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 accelerate_gpt2_support_chat.py train.stage_epochs=2
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import math
import random
import shutil
import sys
import tempfile
from datetime import timedelta

import torch
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from torch.utils.data import DataLoader, Dataset
from transformers import GPT2Config, GPT2LMHeadModel

CONFIG = {
    "paths": {"workdir": os.path.join(tempfile.gettempdir(), "support-chat-gpt2")},
    "data": {"n_dialogs": 240, "block": 20, "seed": 5},
    "model": {"n_embd": 48, "n_layer": 2, "n_head": 2},
    "train": {"stage_epochs": 1, "batch_size": 8, "lr": 3e-3, "seed": 1, "timeout_s": 60},
}

GREETINGS = ["hi", "hello", "hey"]
ISSUES = ["my order is late", "the app keeps closing", "i forgot my password", "the invoice is wrong"]
REPLIES = ["sorry to hear that", "let me check", "i can help with that", "thanks for waiting"]
ACTIONS = ["resetting it now", "sending a refund", "escalating the ticket", "updating the address"]


def apply_overrides(cfg, argv):
    for arg in argv:
        dotted, raw = arg.split("=", 1)
        section, key = dotted.split(".")
        cfg[section][key] = type(cfg[section][key])(raw)
    return cfg


def dialog(rng):
    return (
        f"user : {rng.choice(GREETINGS)} {rng.choice(ISSUES)} agent : {rng.choice(REPLIES)} "
        f"{rng.choice(ACTIONS)}"
    )


def build_cache(path, n, seed):
    rng = random.Random(seed)
    texts = [dialog(rng) for _ in range(n)]
    vocab = sorted({w for t in texts for w in t.split()})
    with open(path, "w") as f:
        json.dump({"vocab": ["<pad>", "<eos>"] + vocab, "texts": texts}, f)


class ChatDataset(Dataset):
    def __init__(self, texts, stoi, block):
        self.items = []
        for t in texts:
            ids = [stoi[w] for w in t.split()][: block - 1] + [1]
            labels = ids + [-100] * (block - len(ids))
            ids = ids + [0] * (block - len(ids))
            self.items.append((torch.tensor(ids), torch.tensor(labels)))

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return self.items[i]


def perplexity(accelerator, model, loader):
    model.eval()
    losses = []
    for ids, labels in loader:
        with torch.no_grad():
            loss = model(input_ids=ids, labels=labels).loss
        losses.append(accelerator.gather_for_metrics(loss.repeat(ids.size(0))))
    model.train()
    return math.exp(torch.cat(losses).mean().item())


def run_epochs(accelerator, model, optimizer, train_loader, n_epochs, tag):
    for epoch in range(n_epochs):
        for ids, labels in train_loader:
            loss = model(input_ids=ids, labels=labels).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
        accelerator.print(f"[{tag}] epoch {epoch} last loss {loss.item():.3f}")


def main():
    cfg = apply_overrides(CONFIG, sys.argv[1:])
    tr = cfg["train"]
    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=tr["timeout_s"]))])
    set_seed(tr["seed"])
    workdir = cfg["paths"]["workdir"]
    cache = os.path.join(workdir, "dialogs.json")

    with accelerator.main_process_first():
        if accelerator.is_main_process:
            shutil.rmtree(workdir, ignore_errors=True)
            os.makedirs(workdir)
            build_cache(cache, cfg["data"]["n_dialogs"], cfg["data"]["seed"])
        with open(cache) as f:
            blob = json.load(f)

    stoi = {w: i for i, w in enumerate(blob["vocab"])}
    texts = blob["texts"]
    split = int(0.8 * len(texts))
    train_ds = ChatDataset(texts[:split], stoi, cfg["data"]["block"])
    valid_ds = ChatDataset(texts[split:], stoi, cfg["data"]["block"])

    model = GPT2LMHeadModel(
        GPT2Config(vocab_size=len(stoi), n_positions=cfg["data"]["block"], bos_token_id=1, eos_token_id=1, **cfg["model"])
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=tr["lr"])
    train_loader = DataLoader(train_ds, batch_size=tr["batch_size"], shuffle=True)
    valid_loader = DataLoader(valid_ds, batch_size=16)
    model, optimizer, train_loader, valid_loader = accelerator.prepare(model, optimizer, train_loader, valid_loader)

    run_epochs(accelerator, model, optimizer, train_loader, tr["stage_epochs"], "stage1")
    ppl1 = perplexity(accelerator, model, valid_loader)
    accelerator.print(f"stage1 valid perplexity {ppl1:.2f}")
    ckpt = os.path.join(workdir, "stage1_state")
    accelerator.save_state(ckpt)
    accelerator.wait_for_everyone()

    # resume, as a restarted job would
    accelerator.load_state(ckpt)
    run_epochs(accelerator, model, optimizer, train_loader, tr["stage_epochs"], "stage2")
    ppl2 = perplexity(accelerator, model, valid_loader)
    accelerator.print(f"stage2 valid perplexity {ppl2:.2f}")

    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        accelerator.unwrap_model(model).save_pretrained(os.path.join(workdir, "final"))
        with open(os.path.join(workdir, "metrics.json"), "w") as f:
            json.dump({"stage1_ppl": ppl1, "stage2_ppl": ppl2}, f)
    accelerator.end_training()


if __name__ == "__main__":
    main()
