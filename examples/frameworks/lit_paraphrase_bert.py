"""Paraphrase detection: a tiny Hugging Face BERT wrapped in a LightningModule.

Meant to be started by torchrun (Lightning picks up the torchelastic environment):
    python -m torch.distributed.run --nproc-per-node 2 lit_paraphrase_bert.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import random
import tempfile
from dataclasses import asdict, dataclass
from datetime import timedelta

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.strategies import DDPStrategy
from sklearn.metrics import f1_score
from torch.utils.data import DataLoader, TensorDataset
from transformers import BertConfig, BertForSequenceClassification

SYNONYMS = [("big", "large"), ("fast", "quick"), ("buy", "purchase"), ("start", "begin"), ("help", "assist"),
            ("answer", "reply"), ("car", "automobile"), ("smart", "clever")]
FRAME = ["i", "want", "to", "the", "a", "please", "now", "we", "can", "very"]


@dataclass
class HParams:
    n_train: int = 384
    n_val: int = 96
    max_len: int = 18
    hidden: int = 32
    layers: int = 2
    lr: float = 2e-3
    batch_size: int = 16
    max_epochs: int = 3
    timeout_s: int = 30
    root: str = os.path.join(tempfile.gettempdir(), "lit-paraphrase")


def build_vocab():
    words = sorted({w for pair in SYNONYMS for w in pair} | set(FRAME))
    return {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, **{w: i + 3 for i, w in enumerate(words)}}


def make_pairs(n, seed, vocab, max_len):
    rng = random.Random(seed)
    ids, labels = [], []
    for _ in range(n):
        a_words = rng.sample(FRAME, 4)
        i, j = rng.sample(range(len(SYNONYMS)), 2)
        a_words.insert(rng.randrange(5), SYNONYMS[i][0])
        same = rng.random() < 0.5
        b_words = list(a_words)
        b_words[b_words.index(SYNONYMS[i][0])] = SYNONYMS[i][1] if same else SYNONYMS[j][rng.randint(0, 1)]
        rng.shuffle(b_words)
        row = [1] + [vocab[w] for w in a_words] + [2] + [vocab[w] for w in b_words] + [2]
        ids.append(row + [0] * (max_len - len(row)))
        labels.append(int(same))
    ids = torch.tensor(ids)
    return TensorDataset(ids, (ids != 0).long(), torch.tensor(labels))


class ParaphraseModule(L.LightningModule):
    def __init__(self, vocab_size, hp: HParams):
        super().__init__()
        self.save_hyperparameters({"vocab_size": vocab_size, **asdict(hp)})
        self.bert = BertForSequenceClassification(
            BertConfig(
                vocab_size=vocab_size,
                hidden_size=hp.hidden,
                num_hidden_layers=hp.layers,
                num_attention_heads=2,
                intermediate_size=hp.hidden * 2,
                max_position_embeddings=32,
                num_labels=2,
            )
        )
        self._val_preds, self._val_labels = [], []

    def training_step(self, batch, batch_idx):
        ids, mask, y = batch
        out = self.bert(input_ids=ids, attention_mask=mask, labels=y)
        self.log("train_loss", out.loss, prog_bar=True)
        return out.loss

    def validation_step(self, batch, batch_idx):
        ids, mask, y = batch
        out = self.bert(input_ids=ids, attention_mask=mask, labels=y)
        self.log("val_loss", out.loss, sync_dist=True)
        self._val_preds.append(out.logits.argmax(-1).cpu())
        self._val_labels.append(y.cpu())

    def on_validation_epoch_end(self):
        preds = torch.cat(self._val_preds).numpy()
        labels = torch.cat(self._val_labels).numpy()
        self._val_preds.clear()
        self._val_labels.clear()
        if self.trainer.is_global_zero:
            # sklearn's F1 is cheap, no need to compute it on every process
            self.log("val_f1", float(f1_score(labels, preds, zero_division=0)), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.hparams.lr)


def main(hp: HParams):
    L.seed_everything(1)
    vocab = build_vocab()
    train_dl = DataLoader(make_pairs(hp.n_train, 1, vocab, hp.max_len), batch_size=hp.batch_size, shuffle=True)
    val_dl = DataLoader(make_pairs(hp.n_val, 2, vocab, hp.max_len), batch_size=32)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=hp.timeout_s)),
        max_epochs=hp.max_epochs,
        default_root_dir=hp.root,
        logger=False,
        callbacks=[ModelCheckpoint(dirpath=os.path.join(hp.root, "ckpt"), monitor="val_loss", save_top_k=1)],
        enable_progress_bar=False,
        num_sanity_val_steps=0,
    )
    trainer.fit(ParaphraseModule(len(vocab), hp), train_dl, val_dl)


if __name__ == "__main__":
    main(HParams())
