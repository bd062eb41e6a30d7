"""Small CNN trainer with HF-style TrainingArguments, callbacks, gradient
accumulation, a background logging thread and a SIGTERM (preemption) handler.

    torchrun --nproc-per-node 2 preempt_safe_trainer.py
"""
import argparse
import atexit
import dataclasses
import json
import os
import queue
import signal
import threading
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


@dataclass
class TrainingArguments:
    output_dir: str = os.path.join(HERE, "runs/shapes")
    data_file: str = os.path.join(HERE, "data/shapes/train.pt")
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    gradient_accumulation_steps: int = 2
    learning_rate: float = 2e-3
    warmup_steps: int = 10
    dataloader_num_workers: int = 2
    dataloader_timeout: int = 30
    logging_steps: int = 10
    stop_check_steps: int = 5
    pg_timeout: int = 10


def parse_args() -> TrainingArguments:
    p = argparse.ArgumentParser()
    for f in dataclasses.fields(TrainingArguments):
        p.add_argument("--" + f.name.replace("_", "-"), type=f.type, default=f.default)
    return TrainingArguments(**vars(p.parse_args()))


class AsyncLogger(threading.Thread):
    """Writes log records from a queue so the training loop never touches the disk."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.q = queue.Queue()
        self.path = path

    def run(self):
        with open(self.path, "a") as f:
            while True:
                rec = self.q.get()
                if rec is None:
                    break
                f.write(json.dumps(rec) + "\n")
                f.flush()

    def log(self, **rec):
        self.q.put(rec)

    def close(self):
        if self.is_alive():
            self.q.put(None)
            self.join(timeout=10)


class Callback:
    def on_step_end(self, trainer, step, loss): pass
    def on_epoch_end(self, trainer, epoch): pass


class LoggingCallback(Callback):
    def on_step_end(self, trainer, step, loss):
        if step % trainer.args.logging_steps == 0:
            trainer.logger.log(step=step, loss=loss, lr=trainer.sched.get_last_lr()[0])
            if trainer.rank == 0:
                print(f"step {step} loss {loss:.4f}", flush=True)


class CheckpointCallback(Callback):
    def on_epoch_end(self, trainer, epoch):
        trainer.save_checkpoint(f"epoch{epoch}")


class SmallCNN(nn.Module):
    def __init__(self, n_classes=4):
        super().__init__()
        self.c1 = nn.Conv2d(1, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 4 * 4, n_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc(x.flatten(1))


class Trainer:
    def __init__(self, args: TrainingArguments, callbacks):
        self.args = args
        dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        torch.manual_seed(0)
        torch.set_num_threads(1)
        os.makedirs(args.output_dir, exist_ok=True)
        self.logger = AsyncLogger(os.path.join(args.output_dir, f"log_rank{self.rank}.jsonl"))
        self.logger.start()
        atexit.register(self.logger.close)
        self.callbacks = callbacks
        self._preempted = False
        signal.signal(signal.SIGTERM, self._on_sigterm)

        data = torch.load(args.data_file)
        ds = TensorDataset(data["x"], data["y"])
        self.sampler = DistributedSampler(ds, shuffle=True, seed=0)
        self.loader = DataLoader(ds, batch_size=args.per_device_train_batch_size, sampler=self.sampler,
                                 num_workers=args.dataloader_num_workers, persistent_workers=True,
                                 timeout=args.dataloader_timeout, drop_last=True)
        self.model = DDP(SmallCNN())
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate)
        updates = args.num_train_epochs * len(self.loader) // args.gradient_accumulation_steps
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / args.warmup_steps) * max(0.0, 1 - s / updates))

    def _on_sigterm(self, signum, frame):
        # only set a flag here; the ranks agree on stopping at the next check
        self._preempted = True

    def should_stop(self):
        flag = torch.tensor([1 if self._preempted else 0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def save_checkpoint(self, tag):
        if self.rank == 0:
            torch.save({"model": self.model.module.state_dict(), "opt": self.opt.state_dict(),
                        "sched": self.sched.state_dict()}, os.path.join(self.args.output_dir, f"{tag}.pt"))
        dist.barrier()

    def train(self):
        accum = self.args.gradient_accumulation_steps
        update = 0
        for epoch in range(self.args.num_train_epochs):
            self.sampler.set_epoch(epoch)
            self.model.train()
            for i, (x, y) in enumerate(self.loader):
                sync = (i + 1) % accum == 0
                ctx = self.model.no_sync() if not sync else torch.enable_grad()
                with ctx:
                    loss = F.cross_entropy(self.model(x), y) / accum
                    loss.backward()
                if not sync:
                    continue
                self.opt.step()
                self.sched.step()
                self.opt.zero_grad(set_to_none=True)
                update += 1
                for cb in self.callbacks:
                    cb.on_step_end(self, update, loss.item() * accum)
                if update % self.args.stop_check_steps == 0 and self.should_stop():
                    self.save_checkpoint("preempt")
                    return
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch)

    def finish(self):
        self.logger.close()
        dist.destroy_process_group()


if __name__ == "__main__":
    args = parse_args()
    trainer = Trainer(args, [LoggingCallback(), CheckpointCallback()])
    trainer.train()
    trainer.finish()
