"""Slot tagger (tiny BertForTokenClassification) in Lightning.  The corpus comes as
pre-sharded files, one per rank, produced by the DataModule's prepare_data; partly
unannotated sentences carry -100 labels."""
import json
import os
from datetime import timedelta

import torch
from torch.utils.data import DataLoader
import lightning as L
from lightning.pytorch.strategies import DDPStrategy
from transformers import BertConfig, BertForTokenClassification

from f_common import INTENTS, VOCAB, W2I, make_corpus, pad_batch

TAGS = ["O"] + [f"B-{k}" for k in sorted(INTENTS)]
KEY2TAG = {w: TAGS.index(f"B-{k}") for k, ws in INTENTS.items() for w in ws}


def tag_sentence(text, annotated):
    words = text.split()
    ids = [W2I["[CLS]"]] + [W2I[w] for w in words] + [W2I["[SEP]"]]
    if not annotated:
        return {"ids": ids, "tags": [-100] * len(ids)}
    return {"ids": ids, "tags": [-100] + [KEY2TAG.get(w, 0) for w in words] + [-100]}


class ShardedSlots(L.LightningDataModule):
    def __init__(self, root="shards", world=2, batch_size=8):
        super().__init__()
        self.root, self.world, self.batch_size = root, world, batch_size

    def prepare_data(self):
        if os.path.isdir(self.root):
            return
        os.makedirs(self.root)
        for r in range(self.world):
            rows = [tag_sentence(x["text"], True) for x in make_corpus(320, seed=100 + r)]
            if r == 1:
                # this shard also holds the first slice of the new, not yet annotated crawl
                crawl = [tag_sentence(x["text"], False) for x in make_corpus(8, seed=7)]
                rows[40:40] = crawl
                rows = rows[:320]
            with open(os.path.join(self.root, f"shard_{r}.jsonl"), "w") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")

    def setup(self, stage=None):
        rank = self.trainer.global_rank if self.trainer else 0
        with open(os.path.join(self.root, f"shard_{rank}.jsonl")) as f:
            self.rows = [json.loads(line) for line in f]

    @staticmethod
    def collate(rows):
        ids, mask = pad_batch([r["ids"] for r in rows])
        tags, _ = pad_batch([r["tags"] for r in rows], pad_id=-100)
        return {"input_ids": ids, "attention_mask": mask, "labels": tags}

    def train_dataloader(self):
        # shards are already split per rank, so no DistributedSampler (use_distributed_sampler=False)
        return DataLoader(self.rows, batch_size=self.batch_size, shuffle=False, collate_fn=self.collate)


class Tagger(L.LightningModule):
    def __init__(self):
        super().__init__()
        cfg = BertConfig(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64, num_labels=len(TAGS))
        self.model = BertForTokenClassification(cfg)

    def training_step(self, batch, batch_idx):
        labels = batch["labels"]
        if (labels != -100).sum() == 0:
            return None  # nothing annotated in this batch, skip it
        out = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels)
        self.log("train_loss", out.loss, prog_bar=True)
        return out.loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-3)


def main():
    L.seed_everything(0)
    trainer = L.Trainer(
        accelerator="cpu", devices=2, max_epochs=3, use_distributed_sampler=False,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Tagger(), datamodule=ShardedSlots())
    if trainer.is_global_zero:
        print("final train_loss", float(trainer.callback_metrics["train_loss"]))


if __name__ == "__main__":
    main()
