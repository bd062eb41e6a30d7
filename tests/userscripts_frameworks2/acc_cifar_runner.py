#!/usr/bin/env python
"""CIFAR-10-style image classification with a small CNN on 🤗 Accelerate.

The loop is organised as a runner class (setup / train_epoch / evaluate / checkpoint)
so the same code path is used by the sweep launcher. Synthetic 16x16 images stand in
for the dataset on machines without the download.

    accelerate launch --num_processes 2 acc_cifar_runner.py   (or torchrun --nproc-per-node 2)
"""
import argparse
import json
import math
import os
import shutil
import time
from datetime import timedelta

import torch
import torch.nn.functional as F
from accelerate import Accelerator, InitProcessGroupKwargs
from accelerate.logging import get_logger
from accelerate.utils import ProjectConfiguration, set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

logger = get_logger(__name__)


def synthetic_cifar(n, image_size, num_classes, noise, seed):
    g = torch.Generator().manual_seed(seed)
    prototypes = torch.randn(num_classes, 3, image_size, image_size, generator=g)
    labels = torch.randint(0, num_classes, (n,), generator=g)
    images = prototypes[labels] + noise * torch.randn(n, 3, image_size, image_size, generator=g)
    return TensorDataset(images, labels)


class SmallCNN(nn.Module):
    def __init__(self, channels, num_classes, dropout):
        super().__init__()
        c1, c2 = channels
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(c2, num_classes))

    def forward(self, x):
        return self.head(self.features(x))


class CifarRunner:
    def __init__(self, cfg):
        self.cfg = cfg
        self.accelerator = Accelerator(
            cpu=True,
            gradient_accumulation_steps=cfg["optim"]["grad_accum_steps"],
            project_config=ProjectConfiguration(
                project_dir=cfg["output_dir"], automatic_checkpoint_naming=True,
                total_limit=cfg["checkpoint"]["keep_last"],
            ),
            kwargs_handlers=[InitProcessGroupKwargs(backend="gloo", timeout=timedelta(seconds=30))],
        )
        self.best_acc = 0.0
        self.history = []

    # ------------------------------------------------------------------ setup
    def setup(self):
        cfg, acc = self.cfg, self.accelerator
        if acc.is_main_process:
            shutil.rmtree(cfg["output_dir"], ignore_errors=True)
            os.makedirs(cfg["output_dir"])
        acc.wait_for_everyone()
        set_seed(cfg["data"]["seed"])
        self._build_data()
        self._build_model()
        (self.model, self.optimizer, self.train_loader, self.val_loader, self.scheduler) = acc.prepare(
            self.model, self.optimizer, self.train_loader, self.val_loader, self.scheduler
        )
        logger.info("world=%d steps/epoch=%d", acc.num_processes, len(self.train_loader))

    def _build_data(self):
        d = self.cfg["data"]
        train = synthetic_cifar(d["num_train"], d["image_size"], d["num_classes"], d["noise"], d["seed"])
        val = synthetic_cifar(d["num_val"], d["image_size"], d["num_classes"], d["noise"], d["seed"] + 1)
        bs = self.cfg["optim"]["batch_size"]
        self.train_loader = DataLoader(train, batch_size=bs, shuffle=True, drop_last=True)
        self.val_loader = DataLoader(val, batch_size=64)

    def _build_model(self):
        m, o, d = self.cfg["model"], self.cfg["optim"], self.cfg["data"]
        self.model = SmallCNN(m["channels"], d["num_classes"], m["dropout"])
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=o["lr"], weight_decay=o["weight_decay"])
        steps = o["epochs"] * math.ceil(d["num_train"] / (o["batch_size"] * self.accelerator.num_processes
                                                          * o["grad_accum_steps"]))
        self.scheduler = torch.optim.lr_scheduler.OneCycleLR(self.optimizer, max_lr=o["lr"],
                                                             total_steps=steps * self.accelerator.num_processes + 1)

    # --------------------------------------------------------------- training
    def train_epoch(self, epoch):
        self.model.train()
        acc = self.accelerator
        running, seen, t0 = 0.0, 0, time.time()
        for step, (x, y) in enumerate(self.train_loader):
            with acc.accumulate(self.model):
                loss = F.cross_entropy(self.model(x), y)
                acc.backward(loss)
                if acc.sync_gradients:
                    acc.clip_grad_norm_(self.model.parameters(), self.cfg["optim"]["max_grad_norm"])
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad()
            running += loss.item() * x.size(0)
            seen += x.size(0)
            if step % 10 == 0:
                logger.info("epoch %d step %d loss %.4f lr %.2e", epoch, step, loss.item(),
                            self.scheduler.get_last_lr()[0])
        return running / max(seen, 1), time.time() - t0

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        correct, total, loss_sum = 0, 0, 0.0
        for x, y in self.val_loader:
            logits = self.model(x)
            logits, y = self.accelerator.gather_for_metrics((logits, y))
            loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
            correct += (logits.argmax(-1) == y).sum().item()
            total += y.numel()
        return loss_sum / total, correct / total

    def checkpoint(self, epoch, val_acc):
        self.accelerator.save_state()
        if val_acc > self.best_acc:
            self.best_acc = val_acc
            self.accelerator.wait_for_everyone()
            self.accelerator.save_model(self.model, os.path.join(self.cfg["output_dir"], "best_model"))

    def fit(self):
        for epoch in range(self.cfg["optim"]["epochs"]):
            train_loss, secs = self.train_epoch(epoch)
            val_loss, val_acc = self.evaluate()
            self.history.append({"epoch": epoch, "train_loss": train_loss, "val_loss": val_loss, "val_acc": val_acc})
            logger.info("epoch %d done in %.1fs | train %.4f | val %.4f | acc %.3f", epoch, secs, train_loss,
                        val_loss, val_acc)
            if (epoch + 1) % self.cfg["checkpoint"]["every_epochs"] == 0:
                self.checkpoint(epoch, val_acc)
        if self.accelerator.is_main_process:
            with open(os.path.join(self.cfg["output_dir"], "history.json"), "w") as f:
                json.dump(self.history, f, indent=1)
        self.accelerator.end_training()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "acc_cifar_config.json"))
    cfg = json.load(open(ap.parse_args().config))
    import logging
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    runner = CifarRunner(cfg)
    runner.setup()
    runner.fit()


if __name__ == "__main__":
    main()
