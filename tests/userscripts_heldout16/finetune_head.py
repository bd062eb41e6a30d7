"""Fine-tune a pretrained MLP classifier on a downstream task with DDP.

    torchrun --nproc-per-node 2 finetune_head.py
"""
import argparse
import logging
import math
import os
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger("finetune")


@dataclass
class TrainingArguments:
    data_path: str = "data/finetune.pt"
    pretrained: str = "checkpoints/pretrained.pt"
    output_dir: str = "outputs"
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 64
    learning_rate: float = 3e-3
    head_learning_rate: float = 1e-2
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    logging_steps: int = 5
    seed: int = 42
    pg_timeout: int = 10
    label_smoothing: float = 0.05
    extra: dict = field(default_factory=dict)

    @classmethod
    def from_cli(cls):
        p = argparse.ArgumentParser()
        for name, f in cls.__dataclass_fields__.items():
            if name == "extra":
                continue
            flag = "--" + name.replace("_", "-")
            p.add_argument(flag, type=type(f.default), default=f.default)
        return cls(**vars(p.parse_args()))


class Classifier(nn.Module):
    def __init__(self, in_dim=32, hidden=64, num_classes=10):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, hidden), nn.GELU(),
                                      nn.Linear(hidden, hidden), nn.GELU())
        self.head = nn.Linear(hidden, num_classes)
        self.hidden = hidden

    def reset_head(self, num_classes):
        """Swap the classification head for a fresh one with `num_classes` outputs."""
        self.head = nn.Linear(self.hidden, num_classes)
        nn.init.zeros_(self.head.bias)

    def forward(self, x):
        return self.head(self.backbone(x))


class Trainer:
    def __init__(self, args: TrainingArguments):
        self.args = args
        self.rank = dist.get_rank()
        self.world_size = dist.get_world_size()
        self.is_main = self.rank == 0

        data = torch.load(args.data_path)
        self.dataset = TensorDataset(data["x"], data["y"])
        self.num_labels = int(data["y"].max()) + 1
        self.sampler = DistributedSampler(self.dataset, shuffle=True, seed=args.seed)
        self.loader = DataLoader(self.dataset, batch_size=args.per_device_train_batch_size,
                                 sampler=self.sampler, drop_last=True)

        ckpt = torch.load(args.pretrained)
        model = Classifier(num_classes=ckpt["num_classes"])
        model.backbone.load_state_dict(ckpt["backbone"])
        model.head.load_state_dict(ckpt["head"])
        self.model = DDP(model)

        if ckpt["num_classes"] != self.num_labels:
            if self.is_main:
                logger.info("pretrained head has %d classes, task has %d: re-initialising head",
                            ckpt["num_classes"], self.num_labels)
            self.model.module.reset_head(self.num_labels)

        self.optimizer = self.create_optimizer()
        self.total_steps = len(self.loader) * args.num_train_epochs
        self.scheduler = self.create_scheduler()
        self.global_step = 0

    def create_optimizer(self):
        m = self.model.module
        groups = [
            {"params": m.backbone.parameters(), "lr": self.args.learning_rate},
            {"params": m.head.parameters(), "lr": self.args.head_learning_rate},
        ]
        return torch.optim.AdamW(groups, weight_decay=self.args.weight_decay)

    def create_scheduler(self):
        warmup = max(1, int(self.total_steps * self.args.warmup_ratio))

        def lr_lambda(step):
            if step < warmup:
                return (step + 1) / warmup
            progress = (step - warmup) / max(1, self.total_steps - warmup)
            return 0.5 * (1 + math.cos(math.pi * progress))

        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_lambda)

    def training_step(self, batch):
        x, y = batch
        logits = self.model(x)
        loss = F.cross_entropy(logits, y, label_smoothing=self.args.label_smoothing)
        acc = (logits.argmax(1) == y).float().mean()
        return loss, acc

    def train(self):
        self.model.train()
        for epoch in range(self.args.num_train_epochs):
            self.sampler.set_epoch(epoch)
            t0 = time.time()
            running = torch.zeros(2)
            for step, batch in enumerate(self.loader):
                loss, acc = self.training_step(batch)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                self.global_step += 1
                running += torch.tensor([loss.item(), acc.item()])
                if self.global_step % self.args.logging_steps == 0 and self.is_main:
                    logger.info("epoch %d step %d loss %.4f acc %.3f lr %.2e", epoch,
                                self.global_step, loss.item(), acc.item(),
                                self.scheduler.get_last_lr()[0])
            dist.all_reduce(running)
            running /= (len(self.loader) * self.world_size)
            if self.is_main:
                logger.info("epoch %d done in %.1fs: mean loss %.4f mean acc %.3f", epoch,
                            time.time() - t0, running[0].item(), running[1].item())
        self.save()

    def save(self):
        if self.is_main:
            os.makedirs(self.args.output_dir, exist_ok=True)
            path = os.path.join(self.args.output_dir, "finetuned.pt")
            torch.save(self.model.module.state_dict(), path)
            logger.info("saved %s", path)
        dist.barrier()


def main():
    args = TrainingArguments.from_cli()
    logging.basicConfig(level=logging.INFO,
                        format=f"[rank{os.environ.get('RANK', '0')}] %(asctime)s %(message)s")
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    try:
        trainer = Trainer(args)
        trainer.train()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
