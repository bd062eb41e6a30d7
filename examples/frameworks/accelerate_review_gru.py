"""Product-review rating model (embedding + GRU) trained with Accelerate.

Launch:
    python -m torch.distributed.run --nproc-per-node 2 accelerate_review_gru.py
"""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import random
import tempfile
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.nn as nn
import torch.nn.functional as F
from accelerate import Accelerator
from accelerate.utils import InitProcessGroupKwargs, set_seed
from sklearn.metrics import mean_absolute_error
from torch.utils.data import DataLoader, TensorDataset

GOOD = ["sturdy", "fast", "cheap", "reliable", "beautiful", "comfortable"]
BAD = ["broken", "slow", "flimsy", "noisy", "ugly", "late"]
NEUTRAL = ["box", "delivery", "size", "colour", "cable", "the", "was", "and", "item"]


@dataclass
class Config:
    out_dir: str = os.path.join(tempfile.gettempdir(), "review-gru")
    n_train: int = 320
    n_valid: int = 64
    seq_len: int = 8
    emb: int = 32
    hidden: int = 32
    epochs: int = 3
    batch_size: int = 16
    lr: float = 5e-3
    save_every: int = 1
    timeout_s: int = 30
    seed: int = 13


def synth_reviews(n, seq_len, vocab, seed):
    rng = random.Random(seed)
    xs, ys = [], []
    for _ in range(n):
        n_good = rng.randint(0, 3)
        n_bad = rng.randint(0, 3)
        words = rng.sample(GOOD, n_good) + rng.sample(BAD, n_bad)
        words += rng.sample(NEUTRAL, seq_len - len(words))
        rng.shuffle(words)
        xs.append([vocab[w] for w in words])
        ys.append(float(min(5, max(1, 3 + n_good - n_bad))))
    return TensorDataset(torch.tensor(xs), torch.tensor(ys))


class RatingGRU(nn.Module):
    def __init__(self, vocab_size, emb, hidden):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, emb)
        self.gru = nn.GRU(emb, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        _, h = self.gru(self.emb(x))
        return self.head(h[-1]).squeeze(-1)


class ReviewRunner:
    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.accelerator = Accelerator(
            cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=cfg.timeout_s))]
        )
        set_seed(cfg.seed)
        vocab = {w: i for i, w in enumerate(GOOD + BAD + NEUTRAL)}
        train = synth_reviews(cfg.n_train, cfg.seq_len, vocab, cfg.seed)
        valid = synth_reviews(cfg.n_valid, cfg.seq_len, vocab, cfg.seed + 1)
        model = RatingGRU(len(vocab), cfg.emb, cfg.hidden)
        optim = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        self.model, self.optim, self.train_dl, self.valid_dl = self.accelerator.prepare(
            model,
            optim,
            DataLoader(train, batch_size=cfg.batch_size, shuffle=True),
            DataLoader(valid, batch_size=cfg.batch_size),
        )

    def train_one_epoch(self):
        self.model.train()
        for x, y in self.train_dl:
            loss = F.mse_loss(self.model(x), y)
            self.accelerator.backward(loss)
            self.optim.step()
            self.optim.zero_grad()
        return loss.item()

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        preds, refs = [], []
        for x, y in self.valid_dl:
            p, r = self.accelerator.gather_for_metrics((self.model(x), y))
            preds.append(p)
            refs.append(r)
        return mean_absolute_error(torch.cat(refs).numpy(), torch.cat(preds).clamp(1, 5).numpy())

    def save_checkpoint(self, epoch):
        path = os.path.join(self.cfg.out_dir, f"epoch_{epoch}")
        os.makedirs(path, exist_ok=True)
        self.accelerator.wait_for_everyone()
        state = self.accelerator.unwrap_model(self.model).state_dict()
        self.accelerator.save(state, os.path.join(path, "model.pt"))
        self.accelerator.print(f"saved {path}")

    def fit(self):
        for epoch in range(self.cfg.epochs):
            last_loss = self.train_one_epoch()
            mae = self.validate()
            self.accelerator.print(f"epoch {epoch}: loss={last_loss:.3f} valid MAE={mae:.3f}")
            if self.accelerator.is_main_process and (epoch + 1) % self.cfg.save_every == 0:
                self.save_checkpoint(epoch)
        self.accelerator.wait_for_everyone()
        self.accelerator.end_training()


if __name__ == "__main__":
    ReviewRunner(Config()).fit()
