#!/usr/bin/env python
"""Banking intent classifier (DistilBERT-mini) trained with the HF Trainer.

Settings come from hf_intent_config.json. Live training metrics are exposed over
HTTP (GET /metrics -> JSON) so the cluster dashboard / liveness probe can scrape
them while the job runs.

    torchrun --nproc-per-node 2 hf_intent_metrics.py [--config hf_intent_config.json]
"""
import argparse
import json
import logging
import os
import random
import shutil
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import torch
import torch.distributed as dist
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import (
    DataCollatorWithPadding,
    DistilBertConfig,
    DistilBertForSequenceClassification,
    PreTrainedTokenizerFast,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

log = logging.getLogger("intent")

TEMPLATES = {
    "check_balance": ["what is my balance", "how much money do i have", "show account balance please"],
    "transfer_money": ["send money to {n}", "transfer funds to {n} today", "move cash to my {a} account"],
    "card_lost": ["i lost my card", "my card was stolen", "cannot find my {a} card"],
    "open_account": ["open a new {a} account", "i want to open an account", "how do i start a {a} account"],
    "loan_rate": ["what is the loan rate", "interest on a {a} loan", "current mortgage rate please"],
    "cancel_card": ["cancel my card", "please close my {a} card", "i want to cancel the card"],
}
NAMES = ["alice", "bob", "carol", "dan", "erin", "frank"]
ADJ = ["savings", "checking", "business", "student", "joint", "credit"]


def synth_utterances(intents, n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        lab = rng.randrange(len(intents))
        text = rng.choice(TEMPLATES[intents[lab]]).format(n=rng.choice(NAMES), a=rng.choice(ADJ))
        if rng.random() < 0.3:
            text = "hi " + text
        rows.append((text, lab))
    return rows


def make_tokenizer(rows):
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for text, _ in rows:
        for w in text.split():
            vocab.setdefault(w, len(vocab))
    tk = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="[PAD]", unk_token="[UNK]",
                                   cls_token="[CLS]", sep_token="[SEP]")


class IntentDataset(torch.utils.data.Dataset):
    def __init__(self, rows, tok, max_length):
        self.rows = rows
        self.tok = tok
        self.max_length = max_length

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        text, lab = self.rows[i]
        enc = self.tok(text, truncation=True, max_length=self.max_length)
        enc["labels"] = lab
        return enc


class _MetricsHandler(BaseHTTPRequestHandler):
    snapshot = {}

    def do_GET(self):
        body = json.dumps(self.snapshot).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # keep the training log clean
        pass


class MetricsExporterCallback(TrainerCallback):
    """Serves the most recent `logs` dict at http://<host>:<port>/metrics."""

    def __init__(self, port):
        self.port = port
        self.server = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.server = ThreadingHTTPServer(("0.0.0.0", self.port), _MetricsHandler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        log.info("metrics exporter listening on :%d", self.port)

    def on_log(self, args, state, control, logs=None, **kwargs):
        _MetricsHandler.snapshot = {"step": state.global_step, "epoch": state.epoch, **(logs or {})}

    def on_train_end(self, args, state, control, **kwargs):
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


class ThroughputCallback(TrainerCallback):
    def __init__(self, batch_size, world_size):
        self.samples_per_step = batch_size * world_size
        self.t0 = None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.t0 is None:
            self.t0 = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.t0 and state.global_step and logs is not None and "loss" in logs:
            elapsed = time.perf_counter() - self.t0
            logs["samples_per_sec"] = round(state.global_step * self.samples_per_step / elapsed, 1)


def accuracy(eval_pred):
    logits, labels = eval_pred
    return {"accuracy": float((logits.argmax(-1) == labels).mean())}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "hf_intent_config.json"))
    cfg = json.load(open(ap.parse_args().config))
    tcfg, mcfg = cfg["train"], cfg["model"]

    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s rank{os.environ.get('RANK', '0')} %(levelname)s %(message)s")
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    world = dist.get_world_size()
    if dist.get_rank() == 0:
        shutil.rmtree(cfg["output_dir"], ignore_errors=True)
    dist.barrier()

    intents = cfg["intents"]
    train_rows = synth_utterances(intents, cfg["num_train"], tcfg["seed"])
    eval_rows = synth_utterances(intents, cfg["num_eval"], tcfg["seed"] + 100)
    tok = make_tokenizer(train_rows + eval_rows)

    model = DistilBertForSequenceClassification(DistilBertConfig(
        vocab_size=tok.vocab_size, dim=mcfg["dim"], n_layers=mcfg["n_layers"], n_heads=mcfg["n_heads"],
        hidden_dim=mcfg["hidden_dim"], max_position_embeddings=64, num_labels=len(intents),
        id2label=dict(enumerate(intents)), label2id={k: i for i, k in enumerate(intents)},
    ))

    args = TrainingArguments(
        output_dir=cfg["output_dir"],
        run_name=cfg["run_name"],
        use_cpu=True,
        learning_rate=tcfg["lr"],
        num_train_epochs=tcfg["epochs"],
        per_device_train_batch_size=tcfg["batch_size"],
        per_device_eval_batch_size=32,
        warmup_steps=tcfg["warmup_steps"],
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=2,
        logging_steps=cfg["monitoring"]["log_every"],
        seed=tcfg["seed"],
        report_to="none",
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=IntentDataset(train_rows, tok, cfg["max_length"]),
        eval_dataset=IntentDataset(eval_rows, tok, cfg["max_length"]),
        data_collator=DataCollatorWithPadding(tok),
        compute_metrics=accuracy,
        callbacks=[
            MetricsExporterCallback(cfg["monitoring"]["metrics_port"]),
            ThroughputCallback(tcfg["batch_size"], world),
        ],
    )
    trainer.train()
    final = trainer.evaluate()
    if trainer.is_world_process_zero():
        log.info("final eval: %s", final)
        with open(os.path.join(cfg["output_dir"], "eval_results.json"), "w") as f:
            json.dump(final, f, indent=2)
    trainer.save_model(os.path.join(cfg["output_dir"], "best"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
