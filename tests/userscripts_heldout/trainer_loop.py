"""Minimal re-implementation of the parts of HF Trainer we actually use.

    torchrun --nproc-per-node 2 trainer_loop.py --output-dir outputs/trainer_loop
"""
import argparse
import contextlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


@dataclass
class TrainingArguments:
    output_dir: str = "outputs/trainer_loop"
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 16
    per_device_eval_batch_size: int = 64
    gradient_accumulation_steps: int = 4
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    max_grad_norm: float = 1.0
    logging_steps: int = 10
    seed: int = 42
    pg_timeout: float = 10.0
    extra: dict = field(default_factory=dict)


class PairDataset(Dataset):
    """Sentence-pair classification with random 'sentences' of token ids."""

    def __init__(self, n, vocab=1000, seq=24, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.a = torch.randint(1, vocab, (n, seq), generator=g)
        self.b = torch.randint(1, vocab, (n, seq), generator=g)
        same = torch.rand(n, generator=g) < 0.5
        self.b[same] = self.a[same].roll(1, dims=1)
        self.labels = same.long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"input_a": self.a[i], "input_b": self.b[i], "labels": self.labels[i]}


class PairClassifier(nn.Module):
    def __init__(self, vocab=1000, d=64):
        super().__init__()
        self.emb = nn.EmbeddingBag(vocab, d, mode="mean")
        self.head = nn.Sequential(nn.Linear(4 * d, d), nn.Tanh(), nn.Linear(d, 2))

    def forward(self, input_a, input_b, labels=None):
        a, b = self.emb(input_a), self.emb(input_b)
        logits = self.head(torch.cat([a, b, (a - b).abs(), a * b], -1))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits}


def get_linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return float(step) / float(max(1, num_warmup_steps))
        return max(0.0, float(num_training_steps - step) / float(max(1, num_training_steps - num_warmup_steps)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


class Trainer:
    def __init__(self, model, args, train_dataset, eval_dataset):
        self.args = args
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.model = DDP(model)
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset
        self.state = {"global_step": 0, "epoch": 0, "log_history": []}

    def is_world_process_zero(self):
        return self.rank == 0

    def get_train_dataloader(self):
        self.train_sampler = DistributedSampler(self.train_dataset, seed=self.args.seed)
        return DataLoader(self.train_dataset, batch_size=self.args.per_device_train_batch_size,
                          sampler=self.train_sampler, drop_last=True)

    def get_eval_dataloader(self):
        sampler = DistributedSampler(self.eval_dataset, shuffle=False)
        return DataLoader(self.eval_dataset, batch_size=self.args.per_device_eval_batch_size, sampler=sampler)

    def create_optimizer_and_scheduler(self, num_training_steps):
        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            (no_decay if name.endswith("bias") else decay).append(p)
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": self.args.weight_decay},
             {"params": no_decay, "weight_decay": 0.0}], lr=self.args.learning_rate)
        self.lr_scheduler = get_linear_schedule_with_warmup(
            self.optimizer, int(self.args.warmup_ratio * num_training_steps), num_training_steps)

    def log(self, logs):
        logs = {**logs, "step": self.state["global_step"], "epoch": round(self.state["epoch"], 2)}
        self.state["log_history"].append(logs)
        if self.is_world_process_zero():
            print(json.dumps(logs), flush=True)

    def train(self):
        args = self.args
        train_dl = self.get_train_dataloader()
        updates_per_epoch = math.ceil(len(train_dl) / args.gradient_accumulation_steps)
        max_steps = updates_per_epoch * args.num_train_epochs
        self.create_optimizer_and_scheduler(max_steps)
        running = torch.zeros(2)
        t0 = time.time()
        for epoch in range(args.num_train_epochs):
            self.train_sampler.set_epoch(epoch)
            self.model.train()
            for step, batch in enumerate(train_dl):
                last_micro = (step + 1) % args.gradient_accumulation_steps == 0 or step + 1 == len(train_dl)
                ctx = contextlib.nullcontext() if last_micro else self.model.no_sync()
                with ctx:
                    out = self.model(**batch)
                    (out["loss"] / args.gradient_accumulation_steps).backward()
                running += torch.tensor([out["loss"].item(), 1.0])
                if not last_micro:
                    continue
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), args.max_grad_norm)
                self.optimizer.step()
                self.lr_scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.state["global_step"] += 1
                self.state["epoch"] = epoch + (step + 1) / len(train_dl)
                if self.state["global_step"] % args.logging_steps == 0:
                    dist.all_reduce(running)
                    self.log({"loss": round((running[0] / running[1]).item(), 4),
                              "learning_rate": self.lr_scheduler.get_last_lr()[0]})
                    running.zero_()
            self.log(self.evaluate())
        self.log({"train_runtime": round(time.time() - t0, 2)})

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        preds, labels, loss_sum = [], [], 0.0
        for batch in self.get_eval_dataloader():
            out = self.model.module(**batch)
            loss_sum += out["loss"].item() * len(batch["labels"])
            preds.append(out["logits"].argmax(-1))
            labels.append(batch["labels"])
        local = {"preds": torch.cat(preds).tolist(), "labels": torch.cat(labels).tolist(), "loss_sum": loss_sum}
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, local)
        all_preds = [p for g in gathered for p in g["preds"]]
        all_labels = [y for g in gathered for y in g["labels"]]
        acc = sum(int(p == y) for p, y in zip(all_preds, all_labels)) / len(all_labels)
        return {"eval_loss": round(sum(g["loss_sum"] for g in gathered) / len(all_labels), 4),
                "eval_accuracy": round(acc, 4)}

    def save_model(self):
        if self.is_world_process_zero():
            os.makedirs(self.args.output_dir, exist_ok=True)
            tmp = os.path.join(self.args.output_dir, "pytorch_model.bin.tmp")
            torch.save(self.model.module.state_dict(), tmp)
            os.replace(tmp, os.path.join(self.args.output_dir, "pytorch_model.bin"))
            with open(os.path.join(self.args.output_dir, "trainer_state.json"), "w") as f:
                json.dump({**self.state, "args": asdict(self.args)}, f, indent=1)
        dist.barrier()


def main():
    p = argparse.ArgumentParser()
    for name, fld in TrainingArguments.__dataclass_fields__.items():
        if name != "extra":
            p.add_argument("--" + name.replace("_", "-"), type=type(fld.default), default=fld.default)
    args = TrainingArguments(**vars(p.parse_args()))

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    trainer = Trainer(PairClassifier(), args, PairDataset(3072, seed=1), PairDataset(1000, seed=2))
    trainer.train()
    trainer.save_model()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
