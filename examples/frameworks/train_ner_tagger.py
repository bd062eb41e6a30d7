"""Token classification (toy NER) with a tiny BERT and the HF Trainer.

Config is a nested dict with dotted command-line overrides, e.g.
    python -m torch.distributed.run --nproc-per-node 2 train_ner_tagger.py trainer.epochs=3 data.n_train=320
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import copy
import json
import random
import shutil
import sys
import tempfile
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import f1_score
from torch.utils.data import Dataset
from transformers import BertConfig, BertForTokenClassification, Trainer, TrainerCallback, TrainingArguments

DEFAULTS = {
    "data": {"n_train": 256, "n_eval": 64, "max_len": 20, "seed": 0},
    "model": {"hidden": 32, "layers": 2, "heads": 2},
    "trainer": {
        "output_dir": os.path.join(tempfile.gettempdir(), "ner-tagger"),
        "epochs": 2,
        "batch_size": 16,
        "lr": 3e-3,
        "save_steps": 6,
        "dist_timeout_s": 30,
    },
}

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
FIRST = ["anna", "marco", "li", "sara", "omar", "julia"]
LAST = ["rossi", "chen", "smith", "haddad", "novak"]
PLACES = [["paris"], ["new", "york"], ["lagos"], ["rio", "de", "janeiro"], ["oslo"]]
VERBS = ["visited", "left", "moved", "to", "flew", "from", "lives", "in"]


def load_config(argv):
    cfg = copy.deepcopy(DEFAULTS)
    for item in argv:
        key, value = item.split("=", 1)
        node = cfg
        *parents, leaf = key.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = type(node[leaf])(value)
    return cfg


def make_sentences(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        toks, tags = [], []
        person = [rng.choice(FIRST)] + ([rng.choice(LAST)] if rng.random() < 0.6 else [])
        toks += person
        tags += ["B-PER"] + ["I-PER"] * (len(person) - 1)
        for w in rng.sample(VERBS, 2):
            toks.append(w)
            tags.append("O")
        place = rng.choice(PLACES)
        toks += place
        tags += ["B-LOC"] + ["I-LOC"] * (len(place) - 1)
        out.append((toks, tags))
    return out


class NerDataset(Dataset):
    def __init__(self, sents, vocab, max_len):
        self.rows = []
        label_id = {l: i for i, l in enumerate(LABELS)}
        for toks, tags in sents:
            ids = [vocab.get(t, 1) for t in toks][:max_len]
            lab = [label_id[t] for t in tags][:max_len]
            pad = max_len - len(ids)
            self.rows.append(
                {
                    "input_ids": torch.tensor(ids + [0] * pad),
                    "attention_mask": torch.tensor([1] * len(ids) + [0] * pad),
                    "labels": torch.tensor(lab + [-100] * pad),
                }
            )

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def compute_metrics(p):
    logits, labels = p
    preds = logits.argmax(-1)
    keep = labels != -100
    return {
        "token_f1": f1_score(labels[keep], preds[keep], average="macro"),
        "token_acc": float((labels[keep] == preds[keep]).mean()),
    }


class CheckpointManifestCallback(TrainerCallback):
    """Keeps a small manifest (step -> eval metrics) next to the checkpoints."""

    def __init__(self, manifest_path):
        self.manifest_path = manifest_path
        self.entries = []

    def on_save(self, args, state, control, **kwargs):
        ckpt_dir = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        with open(os.path.join(ckpt_dir, "trainer_state.json")) as f:
            saved_state = json.load(f)
        last_eval = [h for h in saved_state["log_history"] if "eval_token_f1" in h]
        self.entries.append(
            {
                "step": state.global_step,
                "checkpoint": ckpt_dir,
                "eval_token_f1": last_eval[-1]["eval_token_f1"] if last_eval else None,
            }
        )
        if state.is_world_process_zero:
            with open(self.manifest_path, "w") as f:
                json.dump(self.entries, f, indent=2)


def main():
    cfg = load_config(sys.argv[1:])
    tcfg = cfg["trainer"]
    if "LOCAL_RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group(backend="gloo", timeout=timedelta(seconds=tcfg["dist_timeout_s"]))
    if int(os.environ.get("RANK", "0")) == 0:
        shutil.rmtree(tcfg["output_dir"], ignore_errors=True)  # fresh run, no stale checkpoints
    if dist.is_initialized():
        dist.barrier()

    train = make_sentences(cfg["data"]["n_train"], cfg["data"]["seed"])
    evals = make_sentences(cfg["data"]["n_eval"], cfg["data"]["seed"] + 1)
    words = sorted({t for toks, _ in train + evals for t in toks})
    vocab = {w: i + 2 for i, w in enumerate(words)}  # 0 pad, 1 unk

    model = BertForTokenClassification(
        BertConfig(
            vocab_size=len(vocab) + 2,
            hidden_size=cfg["model"]["hidden"],
            num_hidden_layers=cfg["model"]["layers"],
            num_attention_heads=cfg["model"]["heads"],
            intermediate_size=cfg["model"]["hidden"] * 2,
            max_position_embeddings=64,
            num_labels=len(LABELS),
        )
    )
    args = TrainingArguments(
        output_dir=tcfg["output_dir"],
        use_cpu=True,
        num_train_epochs=tcfg["epochs"],
        per_device_train_batch_size=tcfg["batch_size"],
        learning_rate=tcfg["lr"],
        eval_strategy="steps",
        eval_steps=tcfg["save_steps"],
        save_strategy="steps",
        save_steps=tcfg["save_steps"],
        save_total_limit=2,
        logging_steps=3,
        report_to=[],
        ddp_timeout=tcfg["dist_timeout_s"],
        disable_tqdm=True,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=NerDataset(train, vocab, cfg["data"]["max_len"]),
        eval_dataset=NerDataset(evals, vocab, cfg["data"]["max_len"]),
        compute_metrics=compute_metrics,
        callbacks=[CheckpointManifestCallback(os.path.join(tcfg["output_dir"], "manifest.json"))],
    )
    trainer.train()
    if trainer.is_world_process_zero():
        print("best token f1:", max(h.get("eval_token_f1", 0.0) for h in trainer.state.log_history), flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
