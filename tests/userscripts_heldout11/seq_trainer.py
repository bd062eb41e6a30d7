"""Sequence classifier (GRU over synthetic token sequences) with a small Trainer class.

Launch: torchrun --nproc-per-node 2 seq_trainer.py --run-name gru_baseline
"""
import argparse
import json
import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler


class MotifDataset(Dataset):
    """Label = which of N motifs is planted somewhere in a random token sequence."""

    def __init__(self, n, seq_len=48, vocab=64, n_classes=6, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randint(4, vocab, (n, seq_len), generator=g)
        self.y = torch.randint(0, n_classes, (n,), generator=g)
        motifs = torch.randint(4, vocab, (n_classes, 5), generator=torch.Generator().manual_seed(123))
        pos = torch.randint(0, seq_len - 5, (n,), generator=g)
        for i in range(n):
            self.x[i, pos[i]:pos[i] + 5] = motifs[self.y[i]]

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class GRUClassifier(nn.Module):
    def __init__(self, vocab=64, dim=64, n_classes=6):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True, bidirectional=True)
        self.head = nn.Linear(2 * dim, n_classes)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.head(h.max(dim=1).values)


class Trainer:
    def __init__(self, model, train_ds, eval_ds, args):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.is_main = self.rank == 0

        # every run gets its own directory; refuse to silently overwrite an old run
        self.run_dir = os.path.join(args.output_root, args.run_name)
        os.makedirs(self.run_dir)
        self.ckpt_dir = os.path.join(self.run_dir, "checkpoints")
        os.makedirs(self.ckpt_dir, exist_ok=True)

        self.model = DDP(model)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_dl = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.train_sampler,
                                   drop_last=True)
        self.eval_dl = DataLoader(eval_ds, batch_size=256,
                                  sampler=DistributedSampler(eval_ds, shuffle=False))
        total = args.epochs * len(self.train_dl)
        self.sched = torch.optim.lr_scheduler.OneCycleLR(self.opt, max_lr=args.lr, total_steps=total,
                                                         pct_start=0.2)
        self.history = []
        self.step = 0

    def log(self, msg):
        if self.is_main:
            print(f"[trainer] {msg}", flush=True)

    def train_epoch(self, epoch):
        self.model.train()
        self.train_sampler.set_epoch(epoch)
        tot = torch.zeros(3)
        for x, y in self.train_dl:
            logits = self.model(x)
            loss = F.cross_entropy(logits, y, label_smoothing=self.args.label_smoothing)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(self.model.parameters(), self.args.max_grad_norm)
            self.opt.step()
            self.sched.step()
            self.step += 1
            tot += torch.tensor([loss.item() * len(y), (logits.argmax(1) == y).sum().item(), len(y)])
            if self.step % self.args.log_every == 0:
                self.log(f"step {self.step} loss {loss.item():.4f} lr {self.sched.get_last_lr()[0]:.2e}")
        dist.all_reduce(tot)
        return tot[0].item() / tot[2].item(), tot[1].item() / tot[2].item()

    @torch.no_grad()
    def evaluate(self):
        self.model.eval()
        tot = torch.zeros(2)
        for x, y in self.eval_dl:
            tot += torch.tensor([(self.model(x).argmax(1) == y).sum().item(), len(y)])
        dist.all_reduce(tot)
        return tot[0].item() / tot[1].item()

    def save(self, epoch, acc):
        if not self.is_main:
            return
        path = os.path.join(self.ckpt_dir, f"epoch{epoch:02d}.pt")
        torch.save({"model": self.model.module.state_dict(), "opt": self.opt.state_dict(),
                    "epoch": epoch, "acc": acc}, path)

    def fit(self):
        self.log(f"run dir {self.run_dir}, {len(self.train_dl)} steps/epoch on {self.world} ranks")
        for epoch in range(self.args.epochs):
            t0 = time.time()
            tr_loss, tr_acc = self.train_epoch(epoch)
            acc = self.evaluate()
            self.history.append({"epoch": epoch, "train_loss": tr_loss, "train_acc": tr_acc, "eval_acc": acc})
            self.log(f"epoch {epoch}: loss {tr_loss:.4f} train_acc {tr_acc:.3f} eval_acc {acc:.3f} "
                     f"({time.time() - t0:.1f}s)")
            self.save(epoch, acc)
        if self.is_main:
            with open(os.path.join(self.run_dir, "history.json"), "w") as f:
                json.dump(self.history, f, indent=2)
        dist.barrier()


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--run-name", default="gru_baseline")
    p.add_argument("--output-root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "runs"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--label-smoothing", type=float, default=0.05)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--pg-timeout", type=int, default=10)
    return p.parse_args()


def main():
    args = parse_args()
    dist.init_process_group(backend="gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)

    train_ds = MotifDataset(3000, seed=1)
    eval_ds = MotifDataset(600, seed=2)
    model = GRUClassifier()
    trainer = Trainer(model, train_ds, eval_ds, args)
    trainer.fit()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
