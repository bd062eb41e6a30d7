"""Forum-thread topic classifier (EmbeddingBag over the first replies) in Lightning.

Threads come from a JSONL export where each reply is nested inside its parent.
Every process parses only its own share of the export in setup().

Launch with torchrun:
    python -m torch.distributed.run --nproc-per-node 2 lit_forum_thread_topics.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import json
import random
import sys
import tempfile
from datetime import timedelta

import lightning as L
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchmetrics
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader

# long threads blew the default recursion limit in flatten_thread()
sys.setrecursionlimit(1_000_000)

TOPICS = {
    "gpu": ["driver", "cuda", "kernel", "memory", "card", "fan"],
    "python": ["pip", "import", "venv", "error", "module", "version"],
    "cooking": ["oven", "recipe", "salt", "dough", "pan", "bake"],
}
CHATTER = ["thanks", "same", "here", "any", "update", "works", "for", "me", "bump", "+1", "me", "too"]
WORK = os.path.join(tempfile.gettempdir(), "forum-threads")


def export_threads(path, n_threads=400, seed=0):
    """Streams each thread as nested JSON, walking the reply chain like the forum exporter does."""
    rng = random.Random(seed)
    topics = sorted(TOPICS)
    with open(path, "w") as f:
        for i in range(n_threads):
            topic = rng.choice(topics)
            n_replies = rng.randint(2, 8)
            if i == 137:  # two auto-responder bots that kept replying to each other for weeks
                n_replies = 150_000
            msgs = [" ".join(rng.sample(TOPICS[topic], 3) + rng.sample(CHATTER, 2)) for _ in range(min(n_replies, 8))]
            msgs += ["auto reply : ticket received"] * (n_replies - len(msgs))
            head = "".join('{"text": %s, "reply": ' % json.dumps(m) for m in msgs)
            f.write('{"topic": %s, "thread": %s%s%s}\n' % (json.dumps(topic), head, "null", "}" * len(msgs)))


def flatten_thread(node):
    if node is None:
        return []
    return [node["text"]] + flatten_thread(node["reply"])


class ThreadData(L.LightningDataModule):
    def __init__(self, first_k=3, batch_size=32):
        super().__init__()
        self.first_k = first_k
        self.batch_size = batch_size
        self.path = os.path.join(WORK, "threads.jsonl")
        self.vocab = {w: i + 1 for i, w in enumerate(sorted({w for ws in TOPICS.values() for w in ws} | set(CHATTER)))}
        self.topics = sorted(TOPICS)

    def prepare_data(self):
        os.makedirs(WORK, exist_ok=True)
        export_threads(self.path)

    def _encode(self, record):
        turns = flatten_thread(record["thread"])[: self.first_k]
        ids = [self.vocab.get(w, 0) for t in turns for w in t.split()]
        return torch.tensor(ids), self.topics.index(record["topic"])

    def setup(self, stage=None):
        rank, world = self.trainer.global_rank, self.trainer.world_size
        with open(self.path) as f:
            lines = f.readlines()
        mine = lines[rank::world]
        records = [json.loads(line) for line in mine]
        examples = [self._encode(r) for r in records]
        cut = int(0.8 * len(examples))
        self.train_set, self.val_set = examples[:cut], examples[cut:]

    @staticmethod
    def _collate(batch):
        lengths = torch.tensor([len(ids) for ids, _ in batch])
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        return torch.cat([ids for ids, _ in batch]), offsets, torch.tensor([y for _, y in batch])

    def train_dataloader(self):
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, collate_fn=self._collate)

    def val_dataloader(self):
        return DataLoader(self.val_set, batch_size=64, collate_fn=self._collate)


class TopicBag(L.LightningModule):
    def __init__(self, vocab_size, n_topics, dim=32, lr=1e-2):
        super().__init__()
        self.save_hyperparameters()
        self.bag = nn.EmbeddingBag(vocab_size, dim, mode="mean")
        self.out = nn.Linear(dim, n_topics)
        self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=n_topics)

    def forward(self, ids, offsets):
        return self.out(self.bag(ids, offsets))

    def training_step(self, batch, _):
        ids, offsets, y = batch
        loss = F.cross_entropy(self(ids, offsets), y)
        self.log("train_loss", loss, sync_dist=True)
        return loss

    def validation_step(self, batch, _):
        ids, offsets, y = batch
        logits = self(ids, offsets)
        self.val_acc(logits, y)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", self.val_acc, on_epoch=True)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


if __name__ == "__main__":
    L.seed_everything(0)
    dm = ThreadData()
    model = TopicBag(vocab_size=len(dm.vocab) + 1, n_topics=len(dm.topics))
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        max_epochs=3,
        use_distributed_sampler=False,  # setup() already gives each process its own share
        default_root_dir=WORK,
        logger=False,
        callbacks=[ModelCheckpoint(dirpath=os.path.join(WORK, "ckpt"), monitor="val_acc", mode="max")],
        enable_progress_bar=False,
    )
    trainer.fit(model, datamodule=dm)
