"""Classify code snippets (as AST dumps) with a tiny BERT over linearised node types.

Records are kept as JSON strings and only decoded in __getitem__ so that the
DataLoader workers do the parsing. Arguments come from a JSON file parsed by
HfArgumentParser (or the defaults below).

Launch:
    python -m torch.distributed.run --nproc-per-node 2 train_ast_smell_classifier.py [config.json]
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import random
import sys
import tempfile
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, roc_auc_score
from torch.utils.data import Dataset
from transformers import BertConfig, BertForSequenceClassification, HfArgumentParser, Trainer, TrainingArguments

# ASTs of generated/minified code can be very deep; the default limit of 1000
# made linearize() raise RecursionError on those.
sys.setrecursionlimit(1_000_000)

NODE_TYPES = ["Module", "FunctionDef", "Return", "Call", "Name", "Attribute", "BinOp", "Compare", "If", "For",
              "Assign", "Constant", "Subscript", "List", "Dict", "Lambda", "BoolOp", "UnaryOp"]


@dataclass
class DataArguments:
    n_train: int = 160
    n_eval: int = 48
    max_len: int = 48
    n_minified: int = 1
    minified_depth: int = 150_000
    corpus_seed: int = 3
    dist_timeout_s: int = 30


DEFAULT_CONFIG = {
    "output_dir": os.path.join(tempfile.gettempdir(), "ast-smell-clf"),
    "use_cpu": True,
    "num_train_epochs": 2,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 8,
    "learning_rate": 2e-3,
    "eval_strategy": "epoch",
    "save_strategy": "no",
    "logging_steps": 5,
    "dataloader_num_workers": 2,
    "report_to": [],
    "disable_tqdm": True,
    "ddp_timeout": 30,
}


def random_tree(rng, depth=0):
    kind = rng.choice(NODE_TYPES[1:])
    if depth > 3 or rng.random() < 0.3:
        return {"t": kind}
    return {"t": kind, "c": [random_tree(rng, depth + 1) for _ in range(rng.randint(1, 3))]}


def has_suspicious_pattern(tree):
    # toy label: a Compare directly under an Assign
    kids = tree.get("c", [])
    if tree["t"] == "Assign" and any(k["t"] == "Compare" for k in kids):
        return True
    return any(has_suspicious_pattern(k) for k in kids)


def minified_bundle(depth):
    # what a bundler emits for long call chains: f(g(h(...)))
    return '{"t": "Module", "c": [' + '{"t": "Call", "c": [' * depth + '{"t": "Name"}' + "]}" * depth + "]}"


def make_records(n, seed, n_minified=0, minified_depth=0):
    rng = random.Random(seed)
    records = []
    for _ in range(n):
        tree = {"t": "Module", "c": [random_tree(rng) for _ in range(rng.randint(1, 4))]}
        records.append((json.dumps(tree), int(has_suspicious_pattern(tree))))
    for _ in range(n_minified):
        records.insert(rng.randrange(len(records)), (minified_bundle(minified_depth), 0))
    return records


def linearize(tree):
    yield tree["t"]
    for child in tree.get("c", []):
        yield from linearize(child)


class AstDataset(Dataset):
    def __init__(self, records, max_len):
        self.records = records
        self.max_len = max_len
        self.vocab = {t: i + 2 for i, t in enumerate(NODE_TYPES)}  # 0 pad, 1 truncated

    def __len__(self):
        return len(self.records)

    def __getitem__(self, idx):
        text, label = self.records[idx]
        tree = json.loads(text)
        ids = []
        for node_type in linearize(tree):
            if len(ids) == self.max_len:
                ids[-1] = 1
                break
            ids.append(self.vocab[node_type])
        mask = [1] * len(ids) + [0] * (self.max_len - len(ids))
        ids = ids + [0] * (self.max_len - len(ids))
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask), "labels": torch.tensor(label)}


def compute_metrics(p):
    probs = torch.softmax(torch.from_numpy(p.predictions), -1)[:, 1].numpy()
    preds = (probs > 0.5).astype(int)
    out = {"accuracy": accuracy_score(p.label_ids, preds)}
    if len(np.unique(p.label_ids)) == 2:
        out["auc"] = roc_auc_score(p.label_ids, probs)
    return out


def main():
    parser = HfArgumentParser((DataArguments, TrainingArguments))
    if len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        data_args, training_args = parser.parse_json_file(sys.argv[1])
    else:
        data_args, training_args = parser.parse_dict(DEFAULT_CONFIG)

    if "RANK" in os.environ and not dist.is_initialized():
        dist.init_process_group("gloo", timeout=timedelta(seconds=data_args.dist_timeout_s))

    train_ds = AstDataset(make_records(data_args.n_train, data_args.corpus_seed), data_args.max_len)
    eval_ds = AstDataset(
        make_records(data_args.n_eval, data_args.corpus_seed + 1, data_args.n_minified, data_args.minified_depth),
        data_args.max_len,
    )
    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=len(NODE_TYPES) + 2,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=64,
            num_labels=2,
        )
    )
    trainer = Trainer(
        model=model, args=training_args, train_dataset=train_ds, eval_dataset=eval_ds, compute_metrics=compute_metrics
    )
    trainer.train()
    if trainer.is_world_process_zero():
        print("final:", trainer.state.log_history[-2], flush=True)
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
