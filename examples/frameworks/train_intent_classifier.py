"""Intent classification with a tiny BERT, HF Trainer and length-bucketed batches.

Utterances are bucketed by length so that batches need little padding; each
process takes its own slice of the buckets.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 train_intent_classifier.py --epochs 2
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import argparse
import random
import tempfile
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
from sklearn.metrics import accuracy_score, f1_score
from torch.utils.data import DataLoader, Dataset, Sampler
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

INTENTS = {
    "book_flight": ["book", "a", "flight", "to", "rome", "tomorrow", "please", "one", "way"],
    "weather": ["what", "is", "the", "weather", "like", "in", "rome", "today", "tomorrow"],
    "play_music": ["play", "some", "jazz", "music", "please", "loud", "now", "song"],
    "set_alarm": ["wake", "me", "up", "at", "seven", "set", "an", "alarm", "tomorrow"],
}
PAD, UNK = 0, 1


def build_examples(n, seed):
    rng = random.Random(seed)
    names = sorted(INTENTS)
    rows = []
    for _ in range(n):
        label = rng.randrange(len(names))
        words = INTENTS[names[label]]
        rows.append((rng.sample(words, rng.randint(3, len(words))), label))
    return rows, names


class IntentDataset(Dataset):
    def __init__(self, rows, vocab):
        self.rows = [([vocab.get(w, UNK) for w in words], label) for words, label in rows]

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        ids, label = self.rows[i]
        return {"input_ids": ids, "labels": label}


def pad_collate(batch):
    width = max(len(b["input_ids"]) for b in batch)
    ids = torch.full((len(batch), width), PAD, dtype=torch.long)
    for i, b in enumerate(batch):
        ids[i, : len(b["input_ids"])] = torch.tensor(b["input_ids"])
    return {
        "input_ids": ids,
        "attention_mask": (ids != PAD).long(),
        "labels": torch.tensor([b["labels"] for b in batch]),
    }


class ShardedLengthBucketSampler(Sampler):
    """Sorts by length, cuts into batches, shuffles the batches, and gives each rank every world_size-th example."""

    def __init__(self, lengths, batch_size, rank, world_size, seed=0):
        self.lengths = lengths
        self.batch_size = batch_size
        self.rank = rank
        self.world_size = world_size
        self.seed = seed
        self.epoch = 0

    def _my_indices(self):
        order = sorted(range(len(self.lengths)), key=lambda i: self.lengths[i])
        return order[self.rank :: self.world_size]

    def __iter__(self):
        mine = self._my_indices()
        batches = [mine[i : i + self.batch_size] for i in range(0, len(mine), self.batch_size)]
        random.Random(self.seed + self.epoch).shuffle(batches)
        self.epoch += 1
        return iter(batches)

    def __len__(self):
        return (len(self._my_indices()) + self.batch_size - 1) // self.batch_size


class BucketedTrainer(Trainer):
    def get_train_dataloader(self):
        ds = self.train_dataset
        sampler = ShardedLengthBucketSampler(
            [len(ids) for ids, _ in ds.rows],
            self.args.per_device_train_batch_size,
            rank=self.args.process_index,
            world_size=self.args.world_size,
            seed=self.args.seed,
        )
        return DataLoader(ds, batch_sampler=sampler, collate_fn=pad_collate)


def compute_metrics(p):
    preds = np.argmax(p.predictions, axis=-1)
    return {"accuracy": accuracy_score(p.label_ids, preds), "macro_f1": f1_score(p.label_ids, preds, average="macro")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--output-dir", default=os.path.join(tempfile.gettempdir(), "intent-bert"))
    ap.add_argument("--n-train", type=int, default=41)
    ap.add_argument("--n-eval", type=int, default=32)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--timeout", type=int, default=30, help="process group timeout in seconds")
    args = ap.parse_args()

    if int(os.environ.get("WORLD_SIZE", 1)) > 1:
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.timeout))

    train_rows, names = build_examples(args.n_train, seed=11)
    eval_rows, _ = build_examples(args.n_eval, seed=12)
    vocab = {w: i + 2 for i, w in enumerate(sorted({w for ws in INTENTS.values() for w in ws}))}

    model = BertForSequenceClassification(
        BertConfig(
            vocab_size=len(vocab) + 2,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=32,
            num_labels=len(names),
        )
    )
    targs = TrainingArguments(
        output_dir=args.output_dir,
        use_cpu=True,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=8,
        num_train_epochs=args.epochs,
        learning_rate=args.lr,
        eval_strategy="epoch",
        save_strategy="no",
        logging_steps=2,
        report_to=[],
        ddp_timeout=args.timeout,
        disable_tqdm=True,
    )
    trainer = BucketedTrainer(
        model=model,
        args=targs,
        train_dataset=IntentDataset(train_rows, vocab),
        eval_dataset=IntentDataset(eval_rows, vocab),
        data_collator=pad_collate,
        compute_metrics=compute_metrics,
    )
    trainer.train()
    metrics = trainer.evaluate()
    if trainer.is_world_process_zero():
        print(f"eval accuracy={metrics['eval_accuracy']:.3f} macro_f1={metrics['eval_macro_f1']:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
