"""Transformer seq2seq (transliteration) with a small Keras-style callback system."""
import argparse
import math
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

PAD = 0


class Seq2Seq(nn.Module):
    def __init__(self, vocab, d=64, max_len=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(max_len, d) * 0.02)
        self.core = nn.Transformer(d, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                                   dim_feedforward=128, dropout=0.1, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt_in):
        mask = self.core.generate_square_subsequent_mask(tgt_in.size(1))
        s = self.emb(src) + self.pos[:src.size(1)]
        t = self.emb(tgt_in) + self.pos[:tgt_in.size(1)]
        return self.out(self.core(s, t, tgt_mask=mask, tgt_is_causal=True))


class Callback:
    def on_train_begin(self, trainer): ...
    def on_batch_end(self, trainer, step, logs): ...
    def on_epoch_end(self, trainer, epoch, logs): ...
    def on_train_end(self, trainer): ...


class ProgressLogger(Callback):
    def __init__(self, every=20):
        self.every, self.t0 = every, time.time()

    def on_batch_end(self, trainer, step, logs):
        if trainer.rank == 0 and step % self.every == 0:
            print(f"  step {step:4d} loss {logs['loss']:.4f} lr {logs['lr']:.2e}", flush=True)

    def on_epoch_end(self, trainer, epoch, logs):
        if trainer.rank == 0:
            print(f"epoch {epoch} " + " ".join(f"{k}={v:.4f}" for k, v in logs.items())
                  + f" ({time.time() - self.t0:.1f}s)", flush=True)


class ModelCheckpoint(Callback):
    def __init__(self, path, monitor="val_loss", save_every=1):
        self.path, self.monitor, self.save_every, self.best = path, monitor, save_every, math.inf

    def on_epoch_end(self, trainer, epoch, logs):
        is_best = logs[self.monitor] < self.best
        if is_best:
            self.best = logs[self.monitor]
        if (epoch + 1) % self.save_every == 0 and is_best:
            dist.barrier()  # every rank has finished the epoch before rank 0 writes
            if trainer.rank == 0:
                trainer.save(self.path, epoch, best=self.best)
                print(f"  saved best checkpoint ({self.monitor}={self.best:.4f})", flush=True)


class Trainer:
    def __init__(self, model, opt, sched, callbacks, args):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.model, self.opt, self.sched, self.args = DDP(model), opt, sched, args
        self.callbacks = callbacks
        self.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
        self.start_epoch = 0

    def save(self, path, epoch, **extra):
        torch.save({"model": self.model.module.state_dict(), "opt": self.opt.state_dict(),
                    "sched": self.sched.state_dict(), "scaler": self.scaler.state_dict(),
                    "epoch": epoch, **extra}, path)

    def resume(self, path):
        if not os.path.exists(path):
            return
        st = torch.load(path, map_location="cpu")
        self.model.module.load_state_dict(st["model"])
        self.opt.load_state_dict(st["opt"])
        self.sched.load_state_dict(st["sched"])
        self.scaler.load_state_dict(st["scaler"])
        self.start_epoch = st["epoch"] + 1
        for cb in self.callbacks:
            if isinstance(cb, ModelCheckpoint):
                cb.best = st.get("best", math.inf)

    def loss_fn(self, src, tgt):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = self.model(src, tgt[:, :-1])
        return F.cross_entropy(logits.float().flatten(0, 1), tgt[:, 1:].flatten(), ignore_index=PAD), logits

    @torch.no_grad()
    def evaluate(self, loader):
        self.model.eval()
        loss_sum, n, correct = 0.0, 0, torch.zeros(2)
        for src, tgt in loader:
            loss, logits = self.loss_fn(src, tgt)
            loss_sum, n = loss_sum + loss.item() * len(src), n + len(src)
            correct += torch.tensor([(logits.argmax(-1) == tgt[:, 1:]).all(1).sum().item(), len(src)])
        dist.all_reduce(correct)  # sequence accuracy over the whole validation set
        self.model.train()
        return {"val_loss": loss_sum / n, "val_seq_acc": (correct[0] / correct[1]).item()}

    def fit(self, train_ds, val_ds, epochs, batch_size):
        sampler = DistributedSampler(train_ds, shuffle=True, seed=self.args.seed)
        loader = DataLoader(train_ds, batch_size=batch_size, sampler=sampler, drop_last=True)
        # each rank scores a contiguous slice so the dumped samples keep the file order
        per = len(val_ds) // self.world
        val_loader = DataLoader(Subset(val_ds, range(self.rank * per, (self.rank + 1) * per)), batch_size=128)
        for cb in self.callbacks:
            cb.on_train_begin(self)
        for epoch in range(self.start_epoch, epochs):
            sampler.set_epoch(epoch)
            for step, (src, tgt) in enumerate(loader):
                loss, _ = self.loss_fn(src, tgt)
                self.opt.zero_grad(set_to_none=True)
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.opt)
                nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
                self.scaler.step(self.opt)
                self.scaler.update()
                self.sched.step()
                for cb in self.callbacks:
                    cb.on_batch_end(self, step, {"loss": loss.item(), "lr": self.sched.get_last_lr()[0]})
            logs = self.evaluate(val_loader)
            for cb in self.callbacks:
                cb.on_epoch_end(self, epoch, logs)
        for cb in self.callbacks:
            cb.on_train_end(self)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ckpt", default="seq2seq_best.pt")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        torch.manual_seed(args.seed)
        torch.set_num_threads(1)
        train, val = torch.load("data/train.pt"), torch.load("data/val.pt")
        model = Seq2Seq(train["vocab"])
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        steps = args.epochs * (len(train["src"]) // (args.batch_size * dist.get_world_size()))
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=steps, pct_start=0.1)
        trainer = Trainer(model, opt, sched, [ProgressLogger(), ModelCheckpoint(args.ckpt)], args)
        trainer.resume(args.ckpt)
        trainer.fit(TensorDataset(train["src"], train["tgt"]), TensorDataset(val["src"], val["tgt"]),
                    args.epochs, args.batch_size)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
