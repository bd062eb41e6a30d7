"""Fine-tune a small MLP classifier with an HF-Trainer-style loop (DDP on CPU / gloo)."""
import argparse
import gc
import glob
import logging
import math
import os
import shutil
from dataclasses import dataclass
from datetime import timedelta
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

logger = logging.getLogger("hf_loop")


@dataclass
class TrainingArguments:
    output_dir: str = "out_hf"
    num_train_epochs: int = 3
    per_device_train_batch_size: int = 32
    per_device_eval_batch_size: int = 64
    learning_rate: float = 3e-3
    weight_decay: float = 0.01
    warmup_ratio: float = 0.1
    logging_steps: int = 10
    save_total_limit: int = 2
    seed: int = 42
    pg_timeout: int = 10
    resume_from_checkpoint: Optional[str] = None


def parse_args() -> TrainingArguments:
    p = argparse.ArgumentParser()
    p.add_argument("--output-dir", default="out_hf")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--resume-from-checkpoint", default=None)
    a = p.parse_args()
    return TrainingArguments(output_dir=a.output_dir, num_train_epochs=a.epochs, learning_rate=a.lr,
                             pg_timeout=a.pg_timeout, resume_from_checkpoint=a.resume_from_checkpoint)


def make_datasets(seed):
    g = torch.Generator().manual_seed(seed)
    proj = torch.randn(20, 4, generator=g)
    x_train, x_eval = torch.randn(1024, 20, generator=g), torch.randn(300, 20, generator=g)
    return TensorDataset(x_train, (x_train @ proj).argmax(1)), TensorDataset(x_eval, (x_eval @ proj).argmax(1))


def linear_schedule_with_warmup(optimizer, warmup, total):
    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


class Trainer:
    def __init__(self, model, args: TrainingArguments, train_ds, eval_ds):
        self.args, self.rank, self.world = args, dist.get_rank(), dist.get_world_size()
        self.model = DDP(model)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_loader = DataLoader(train_ds, batch_size=args.per_device_train_batch_size, sampler=self.train_sampler)
        self.eval_len = len(eval_ds)
        self.eval_loader = DataLoader(eval_ds, batch_size=args.per_device_eval_batch_size,
                                      sampler=DistributedSampler(eval_ds, shuffle=False))
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate, weight_decay=args.weight_decay)
        total = len(self.train_loader) * args.num_train_epochs
        self.scheduler = linear_schedule_with_warmup(self.optimizer, int(args.warmup_ratio * total), total)
        self.global_step, self.start_epoch, self.best = 0, 0, (-1.0, None)

    def _save_checkpoint(self, epoch, metric):
        path = os.path.join(self.args.output_dir, f"checkpoint-{self.global_step}")
        if self.rank == 0:
            os.makedirs(path, exist_ok=True)
            torch.save({"model": self.model.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(), "global_step": self.global_step,
                        "epoch": epoch, "metric": metric}, os.path.join(path, "trainer_state.pt"))
            ckpts = sorted(glob.glob(os.path.join(self.args.output_dir, "checkpoint-*")),
                           key=lambda p: int(p.rsplit("-", 1)[1]))
            for old in ckpts[:-self.args.save_total_limit]:
                if old != self.best[1]:
                    shutil.rmtree(old, ignore_errors=True)
            logger.info("saved %s", path)
        dist.barrier()  # nobody reads the checkpoint before rank 0 has finished writing it
        return path

    def _load_checkpoint(self, path):
        state = torch.load(os.path.join(path, "trainer_state.pt"), map_location="cpu")
        self.model.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        return state

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        preds, labels = [], []
        for x, y in self.eval_loader:
            preds.append(self.model(x).argmax(-1))
            labels.append(y)
        preds, labels = torch.cat(preds), torch.cat(labels)
        # DistributedSampler pads so every rank holds the same number of rows
        all_p = [torch.empty_like(preds) for _ in range(self.world)]
        all_l = [torch.empty_like(labels) for _ in range(self.world)]
        dist.all_gather(all_p, preds)
        dist.all_gather(all_l, labels)
        # undo the interleaving of the sampler, then drop the padded duplicates
        p = torch.stack(all_p, 1).reshape(-1)[: self.eval_len]
        l = torch.stack(all_l, 1).reshape(-1)[: self.eval_len]
        self.model.train()
        return {"eval_accuracy": (p == l).float().mean().item(), "eval_samples": p.numel()}

    def train(self):
        a = self.args
        if a.resume_from_checkpoint:
            state = self._load_checkpoint(a.resume_from_checkpoint)
            self.global_step, self.start_epoch = state["global_step"], state["epoch"] + 1
            logger.info("resumed from %s at step %d", a.resume_from_checkpoint, self.global_step)
        self.model.train()
        for epoch in range(self.start_epoch, a.num_train_epochs):
            self.train_sampler.set_epoch(epoch)
            running = torch.zeros(2)
            for x, y in self.train_loader:
                loss = F.cross_entropy(self.model(x), y)
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.optimizer.step()
                self.scheduler.step()
                self.global_step += 1
                running += torch.tensor([loss.item(), 1.0])
                if self.global_step % a.logging_steps == 0:
                    dist.all_reduce(running)
                    logger.info("epoch %d step %d loss %.4f lr %.2e", epoch, self.global_step,
                                running[0] / running[1], self.scheduler.get_last_lr()[0])
                    running.zero_()
            metrics = self.evaluate()
            logger.info("epoch %d %s", epoch, metrics)
            path = self._save_checkpoint(epoch, metrics["eval_accuracy"])
            if metrics["eval_accuracy"] > self.best[0]:
                self.best = (metrics["eval_accuracy"], path)
        # load_best_model_at_end
        if self.best[1] is not None:
            self._load_checkpoint(self.best[1])
            logger.info("loaded best model %s (acc %.4f); final %s", self.best[1], self.best[0], self.evaluate())


def main():
    args = parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        rank = dist.get_rank()
        logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                            format=f"[rank{rank}] %(asctime)s %(levelname)s %(message)s")
        torch.manual_seed(args.seed)
        train_ds, eval_ds = make_datasets(args.seed)
        model = nn.Sequential(nn.Linear(20, 64), nn.GELU(), nn.Linear(64, 4))
        trainer = Trainer(model, args, train_ds, eval_ds)
        trainer.train()
        dist.barrier()  # everyone has finished the final evaluation before teardown
        # drop DDP (it holds the process group) before tearing the group down
        del trainer, model
        gc.collect()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
