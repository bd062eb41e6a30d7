"""Synthetic / sklearn-backed datasets and sharding helpers."""
from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import make_classification
from torch.utils.data import DataLoader, Dataset, DistributedSampler, TensorDataset


def tabular_dataset(dcfg, *, seed_offset: int = 0) -> TensorDataset:
    X, y = make_classification(
        n_samples=dcfg.n_samples, n_features=dcfg.n_features, n_informative=dcfg.n_features // 2,
        n_classes=dcfg.num_classes, random_state=dcfg.seed + seed_offset,
    )
    X = (X - X.mean(0)) / (X.std(0) + 1e-6)
    return TensorDataset(torch.tensor(X, dtype=torch.float32), torch.tensor(y, dtype=torch.long))


def blob_images(n: int, num_classes: int, size: int = 32, seed: int = 0) -> TensorDataset:
    """Class-dependent gaussian blobs on noise: cheap stand-in for an image dataset."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    coords = torch.linspace(-1, 1, size)
    yy, xx = torch.meshgrid(coords, coords, indexing="ij")
    centers = torch.stack([torch.cos(y * 2 * np.pi / num_classes), torch.sin(y * 2 * np.pi / num_classes)], 1) * 0.5
    d2 = (xx[None] - centers[:, 0, None, None]) ** 2 + (yy[None] - centers[:, 1, None, None]) ** 2
    img = torch.exp(-d2 / 0.05) + 0.3 * torch.randn(n, size, size, generator=g)
    return TensorDataset(img.unsqueeze(1).float(), y)


def multitask_table(n: int, n_features: int, seed: int = 0, labelled_frac: float = 0.4):
    """Main binary target for every row; auxiliary regression target only for the
    first `labelled_frac` of rows (the hand-annotated export is prepended to the file)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    w = rng.normal(size=n_features)
    y = (X @ w > 0).astype(np.int64)
    aux = (X[:, :4].sum(1) + 0.1 * rng.normal(size=n)).astype(np.float32)
    has_aux = np.zeros(n, dtype=bool)
    has_aux[: int(n * labelled_frac)] = True
    return TensorDataset(torch.from_numpy(X), torch.from_numpy(y), torch.from_numpy(aux), torch.from_numpy(has_aux))


# --------------------------------------------------------------------------- text

INTENTS = ["cancel_subscription", "change_plan", "billing_question", "tech_support", "account_access", "feedback"]


def intent_records(n: int, vocab: int = 500, seq_len: int = 24, seed: int = 0):
    """Time-ordered support tickets. The oldest tickets come from the legacy CRM
    export, which wrote intent names in Title_Case."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        k = int(rng.integers(len(INTENTS)))
        toks = rng.integers(1, vocab, size=seq_len)
        toks[: 4] = 1 + k * 7 + rng.integers(0, 7, size=4)  # intent-bearing tokens
        label = INTENTS[k]
        if i < n // 3 and rng.random() < 0.2:
            label = label.title()  # legacy export
        records.append({"ts": i, "tokens": toks.astype(np.int64), "intent": label})
    return records


class LabelEncoder:
    def __init__(self):
        self.classes_: list[str] = []
        self.index: dict[str, int] = {}

    def fit(self, labels):
        self.classes_ = sorted(set(labels))
        self.index = {c: i for i, c in enumerate(self.classes_)}
        return self

    def transform(self, labels):
        return np.array([self.index[c] for c in labels], dtype=np.int64)

    def __len__(self):
        return len(self.classes_)


class TicketDataset(Dataset):
    def __init__(self, records, labels, encoder: LabelEncoder):
        self.tokens = torch.tensor(np.stack([r["tokens"] for r in records]))
        self.labels = torch.tensor(encoder.transform(labels))

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return self.tokens[i], self.labels[i]


def local_tickets(records, ctx):
    """Each worker reads its own contiguous slice of the (time-ordered) ticket log."""
    per = len(records) // ctx.size
    mine = records[ctx.index * per: (ctx.index + 1) * per]
    labels = [r["intent"].strip() for r in mine]
    enc = LabelEncoder().fit(labels)
    return TicketDataset(mine, labels, enc), enc


# ----------------------------------------------------------------------- loaders

def contiguous_subset(ds, ctx):
    per = len(ds) // ctx.size
    return torch.utils.data.Subset(ds, range(ctx.index * per, (ctx.index + 1) * per))


def make_loader(ds, ctx, batch_size, *, shuffle=True, seed=0, drop_last=False):
    if ctx.distributed:
        sampler = DistributedSampler(ds, num_replicas=ctx.size, rank=ctx.index, shuffle=shuffle, seed=seed)
        return DataLoader(ds, batch_size=batch_size, sampler=sampler, drop_last=drop_last)
    return DataLoader(ds, batch_size=batch_size, shuffle=shuffle, drop_last=drop_last)
