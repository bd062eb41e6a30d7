"""Pieces shared by the Trainer-based scripts: dataset, collator, metrics."""
from dataclasses import dataclass

import numpy as np
import torch
from torch.utils.data import Dataset

from f_common import LABELS, encode, make_corpus, pad_batch


class IntentDataset(Dataset):
    def __init__(self, n, seed):
        self.rows = make_corpus(n, seed=seed)
        self.l2i = {l: i for i, l in enumerate(LABELS)}

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        r = self.rows[i]
        return {"input_ids": encode(r["text"]), "label": self.l2i[r["label"]]}


@dataclass
class IntentCollator:
    """Dynamic padding; also emits the token_type_ids BERT expects."""
    pad_id: int = 0
    max_len: int = 32

    def __call__(self, features):
        ids, mask = pad_batch([f["input_ids"][: self.max_len] for f in features], self.pad_id)
        return {"input_ids": ids, "attention_mask": mask,
                "token_type_ids": torch.zeros_like(ids),
                "labels": torch.tensor([f["label"] for f in features], dtype=torch.long)}


def compute_metrics(eval_pred):
    from sklearn.metrics import f1_score
    logits, labels = eval_pred.predictions, eval_pred.label_ids
    if isinstance(logits, tuple):
        logits = logits[0]
    preds = np.argmax(logits, axis=-1)
    return {"accuracy": float((preds == labels).mean()),
            "macro_f1": float(f1_score(labels, preds, average="macro"))}


def init_gloo(timeout_s=30):
    """On CPU, TrainingArguments(use_cpu=True) builds the process group with the default
    30-minute timeout whatever ddp_timeout says; create it ourselves so hangs end quickly.
    Accelerate's PartialState reuses an already-initialised default group."""
    import datetime
    import os

    import torch.distributed as dist
    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=timeout_s))
