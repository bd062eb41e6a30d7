"""Query/intent relevance classifier in Lightning (tiny BERT cross-encoder over
"[CLS] sentence [SEP] intent-name" pairs).  The dev set is built as one relevant and one
irrelevant pair per sentence; per-batch recall is collected and gathered at epoch end."""
from datetime import timedelta

import torch
from torch.utils.data import DataLoader
import lightning as L
from lightning.pytorch.strategies import DDPStrategy

from f_common import LABELS, W2I, encode, make_corpus, pad_batch, tiny_bert


def make_pairs(n, seed, interleave):
    rows = make_corpus(n, seed=seed)
    g = torch.Generator().manual_seed(seed)
    pos, neg = [], []
    for r in rows:
        wrong = [l for l in LABELS if l != r["label"]][int(torch.randint(0, 4, (1,), generator=g))]
        pos.append((r["text"], r["label"], 1))
        neg.append((r["text"], wrong, 0))
    if interleave:  # dev: (relevant, irrelevant) for each sentence, side by side
        return [p for pair in zip(pos, neg) for p in pair]
    out = pos + neg
    return [out[i] for i in torch.randperm(len(out), generator=g)]


INTENT_TOKEN = {l: W2I[w] for l, w in [("weather", "forecast"), ("music", "song"), ("alarm", "alarm"),
                                       ("food", "pizza"), ("travel", "flight")]}


def collate(rows):
    ids, mask = pad_batch([encode(t)[:-1] + [W2I["[SEP]"], INTENT_TOKEN[l], W2I["[SEP]"]] for t, l, _ in rows])
    return ids, mask, torch.tensor([y for _, _, y in rows])


class PairModel(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = tiny_bert(num_labels=2)
        self._batch_recall = []

    def training_step(self, batch, batch_idx):
        ids, mask, y = batch
        loss = self.model(input_ids=ids, attention_mask=mask, labels=y).loss
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        ids, mask, y = batch
        preds = self.model(input_ids=ids, attention_mask=mask).logits.argmax(-1)
        tp = int(((preds == 1) & (y == 1)).sum())
        pos = int((y == 1).sum())
        self._batch_recall.append(tp / pos if pos else 0)

    def on_validation_epoch_end(self):
        recalls = torch.tensor(self._batch_recall)
        self._batch_recall.clear()
        everything = self.all_gather(recalls)
        self.log("val_recall", everything.float().mean(), prog_bar=True)
        if self.trainer.is_global_zero:
            print(f"epoch {self.current_epoch}: recall {everything.float().mean():.4f}", flush=True)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=2e-3)


def main():
    L.seed_everything(0)
    train = DataLoader(make_pairs(800, seed=1, interleave=False), batch_size=32, shuffle=True, collate_fn=collate)
    dev = DataLoader(make_pairs(160, seed=2, interleave=True), batch_size=32, collate_fn=collate)
    trainer = L.Trainer(
        accelerator="cpu", devices=2, max_epochs=3, num_sanity_val_steps=0,
        strategy=DDPStrategy(process_group_backend="gloo", timeout=timedelta(seconds=30)),
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(PairModel(), train_dataloaders=train, val_dataloaders=dev)


if __name__ == "__main__":
    main()
