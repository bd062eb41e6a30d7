"""Tiny text-regression fine-tune with HF-style arguments and callbacks.

torchrun --nproc-per-node 2 callbacks_metrics.py --num_train_epochs 3
"""
import json
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from typing import List

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset, DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    output_dir: str = os.path.join(HERE, "outputs", "scorer")
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 64
    learning_rate: float = 5e-4
    warmup_steps: int = 20
    logging_steps: int = 10
    vocab_size: int = 500
    seq_len: int = 24
    pg_timeout: int = 10
    seed: int = 42
    report_to: List[str] = field(default_factory=lambda: ["json"])


def parse_args() -> TrainingArguments:
    import argparse
    p = argparse.ArgumentParser()
    for name, f in TrainingArguments.__dataclass_fields__.items():
        if name == "report_to":
            continue
        default = f.default
        flags = [f"--{name}"] + ([f"--{name.replace('_', '-')}"] if "_" in name else [])
        p.add_argument(*flags, type=type(default), default=default)
    return TrainingArguments(**vars(p.parse_args()))


class SyntheticReviews(Dataset):
    """Token sequences whose score is a noisy function of a few 'sentiment' tokens."""

    def __init__(self, n, vocab, seq_len, seed):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, vocab, (n, seq_len), generator=g)
        weights = torch.zeros(vocab)
        weights[1:50] = torch.linspace(-1, 1, 49)
        self.scores = weights[self.ids].sum(1) + 0.1 * torch.randn(n, generator=g)

    def __len__(self):
        return len(self.scores)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.scores[i]}


class BagScorer(nn.Module):
    def __init__(self, vocab, dim=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, 1))

    def forward(self, input_ids):
        return self.mlp(self.emb(input_ids)).squeeze(-1)


class TrainerCallback:
    def on_log(self, state, logs): pass

    def on_evaluate(self, state, metrics): pass


class PrinterCallback(TrainerCallback):
    def on_log(self, state, logs):
        if state["is_world_process_zero"]:
            print({k: round(v, 5) if isinstance(v, float) else v for k, v in logs.items()}, flush=True)


class JsonReporterCallback(TrainerCallback):
    def __init__(self, output_dir):
        self.path = os.path.join(output_dir, "eval_results.json")
        self.history = []

    def on_evaluate(self, state, metrics):
        if not state["is_world_process_zero"]:
            return
        self.history.append({"epoch": state["epoch"], "step": state["global_step"], **metrics})
        with open(self.path, "w") as fh:
            json.dump({"best_metric": state["best_metric"], "log_history": self.history}, fh, indent=2)


class Trainer:
    def __init__(self, model, args, train_dataset, eval_dataset, callbacks):
        self.args = args
        self.rank = dist.get_rank()
        self.model = DDP(model)
        self.callbacks = callbacks
        self.train_sampler = DistributedSampler(train_dataset, seed=args.seed)
        self.train_dl = DataLoader(train_dataset, batch_size=args.per_device_train_batch_size,
                                   sampler=self.train_sampler, drop_last=True)
        self.eval_dl = DataLoader(eval_dataset, batch_size=args.per_device_eval_batch_size,
                                  sampler=DistributedSampler(eval_dataset, shuffle=False))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate)
        total = args.num_train_epochs * len(self.train_dl)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            lambda s: min(1.0, (s + 1) / args.warmup_steps) * max(0.0, (total - s) / total))
        self.state = {"epoch": 0, "global_step": 0, "best_metric": None,
                      "is_world_process_zero": self.rank == 0}

    def _fire(self, event, payload):
        for cb in self.callbacks:
            getattr(cb, event)(self.state, payload)

    def evaluate(self):
        self.model.eval()
        preds, labels = [], []
        with torch.no_grad():
            for batch in self.eval_dl:
                preds.append(self.model(batch["input_ids"]))
                labels.append(batch["labels"])
        preds, labels = torch.cat(preds), torch.cat(labels)
        gathered_p = [torch.zeros_like(preds) for _ in range(dist.get_world_size())]
        gathered_l = [torch.zeros_like(labels) for _ in range(dist.get_world_size())]
        dist.all_gather(gathered_p, preds)
        dist.all_gather(gathered_l, labels)
        p = torch.cat(gathered_p).numpy()
        y = torch.cat(gathered_l).numpy()
        mse = np.mean((p - y) ** 2)
        corr = np.corrcoef(p, y)[0, 1]
        metrics = {"eval_mse": mse, "eval_pearson": corr}
        if self.state["best_metric"] is None or mse < self.state["best_metric"]:
            self.state["best_metric"] = mse
        self._fire("on_evaluate", metrics)
        self.model.train()
        return metrics

    def train(self):
        self.model.train()
        loss_fn = nn.MSELoss()
        for epoch in range(self.args.num_train_epochs):
            self.train_sampler.set_epoch(epoch)
            t0 = time.time()
            for batch in self.train_dl:
                loss = loss_fn(self.model(batch["input_ids"]), batch["labels"])
                loss.backward()
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad()
                self.state["global_step"] += 1
                if self.state["global_step"] % self.args.logging_steps == 0:
                    self._fire("on_log", {"loss": loss.item(), "lr": self.lr_scheduler.get_last_lr()[0],
                                          "step": self.state["global_step"]})
            self.state["epoch"] = epoch + 1
            metrics = self.evaluate()
            self._fire("on_log", {"epoch": epoch + 1, "epoch_time": time.time() - t0,
                                  **{k: float(v) for k, v in metrics.items()}})


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    if dist.get_rank() == 0:
        os.makedirs(args.output_dir, exist_ok=True)
        with open(os.path.join(args.output_dir, "training_args.json"), "w") as fh:
            json.dump(asdict(args), fh, indent=2)
    train_ds = SyntheticReviews(3000, args.vocab_size, args.seq_len, seed=args.seed)
    eval_ds = SyntheticReviews(600, args.vocab_size, args.seq_len, seed=args.seed + 1)
    trainer = Trainer(BagScorer(args.vocab_size), args, train_ds, eval_ds,
                      callbacks=[PrinterCallback(), JsonReporterCallback(args.output_dir)])
    trainer.train()
    if dist.get_rank() == 0:
        print("best eval_mse", float(trainer.state["best_metric"]), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
