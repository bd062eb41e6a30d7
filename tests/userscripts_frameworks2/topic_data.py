"""Data helpers for the news-topic classifier (hf_topic_weighted_loss.py).

The real export from the annotation tool is a JSONL file with one article per
line: {"id": ..., "title": ..., "body": ..., "label": <int or null>}.
`write_synthetic_export` produces a file with the same schema for local runs.
"""
import json
import os
import random
from collections import Counter

import torch

TOPIC_WORDS = {
    0: ["minister", "election", "summit", "border", "treaty", "parliament", "protest"],
    1: ["match", "goal", "season", "coach", "league", "final", "injury"],
    2: ["market", "shares", "profit", "merger", "bank", "earnings", "inflation"],
    3: ["software", "chip", "research", "space", "startup", "robot", "network"],
}
COMMON = ["the", "a", "on", "after", "new", "report", "says", "week", "in", "of", "to", "over"]


def write_synthetic_export(path, n, seed=0):
    """Imbalanced 4-topic corpus in the annotation-tool export format."""
    rng = random.Random(seed)
    topic_p = [0.4, 0.3, 0.2, 0.1]
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for i in range(n):
            label = rng.choices(range(4), weights=topic_p)[0]
            words = [rng.choice(TOPIC_WORDS[label]) for _ in range(rng.randint(2, 4))]
            words += [rng.choice(COMMON) for _ in range(rng.randint(4, 9))]
            rng.shuffle(words)
            row = {"id": f"art-{i:05d}", "title": " ".join(words[:4]), "body": " ".join(words[4:])}
            # a few articles were skipped / flagged by annotators
            r = rng.random()
            if r < 0.01:
                row["label"] = None
            elif r < 0.014:
                row["label"] = 4
            else:
                row["label"] = label
            f.write(json.dumps(row) + "\n")


def read_export(path):
    rows = []
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            if row.get("label") is None:  # unlabeled, skip
                continue
            rows.append(row)
    return rows


def train_val_split(rows, val_fraction, seed):
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    n_val = int(len(rows) * val_fraction)
    return [rows[i] for i in idx[n_val:]], [rows[i] for i in idx[:n_val]]


def inverse_frequency_weights(rows, num_labels):
    counts = Counter(r["label"] for r in rows)
    total = sum(counts[i] for i in range(num_labels))
    return torch.tensor([total / (num_labels * max(counts[i], 1)) for i in range(num_labels)],
                        dtype=torch.float32)


class ArticleDataset(torch.utils.data.Dataset):
    def __init__(self, rows, tokenizer, max_length):
        texts = [r["title"] + " . " + r["body"] for r in rows]
        self.enc = tokenizer(texts, truncation=True, max_length=max_length)
        self.labels = [int(r["label"]) for r in rows]

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        out = {k: v[i] for k, v in self.enc.items()}
        out["labels"] = self.labels[i]
        return out
