"""Knowledge distillation: small student MLP learns from the frozen teacher exported by the research team.

torchrun --nproc-per-node 2 distill_trainer.py [--epochs 3 --alpha 0.7 --temperature 2.0]
"""
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
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


def get_args():
    p = argparse.ArgumentParser()
    p.add_argument("--teacher", default=os.path.join(HERE, "teacher", "teacher.pt"))
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--alpha", type=float, default=0.7, help="weight of the KD term")
    p.add_argument("--temperature", type=float, default=2.0)
    p.add_argument("--n-train", type=int, default=4096)
    p.add_argument("--n-val", type=int, default=1024)
    p.add_argument("--pg-timeout", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def make_data(n, d_in, n_classes, seed):
    w = torch.randn(d_in, n_classes, generator=torch.Generator().manual_seed(1234))  # same task for all splits
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    y = (x @ w + 0.5 * torch.randn(n, n_classes, generator=g)).argmax(dim=1)
    return TensorDataset(x, y)


def load_teacher(path):
    ckpt = torch.load(path, map_location="cpu")
    cfg = ckpt["config"]
    teacher = nn.Sequential(
        nn.Linear(cfg["d_in"], cfg["hidden"]), nn.GELU(),
        nn.Linear(cfg["hidden"], cfg["hidden"]), nn.GELU(),
        nn.Linear(cfg["hidden"], cfg["n_classes"]),
    )
    teacher.load_state_dict(ckpt["model"])
    teacher.eval()
    teacher.requires_grad_(False)   # frozen, we only need its logits
    return teacher, cfg


class Student(nn.Module):
    def __init__(self, d_in, n_classes, hidden=64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)


class DistillTrainer:
    def __init__(self, args, student, teacher, train_ds, val_ds):
        self.args = args
        self.rank = dist.get_rank()
        self.world = dist.get_world_size()
        self.student = self._wrap(student)
        self.teacher = self._wrap(teacher)
        self.train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed)
        self.train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.train_sampler)
        self.val_loader = DataLoader(val_ds, batch_size=256, sampler=DistributedSampler(val_ds, shuffle=False))
        self.opt = torch.optim.AdamW(self.student.parameters(), lr=args.lr, weight_decay=0.01)
        total = args.epochs * len(self.train_loader)
        warmup = max(1, total // 10)
        self.sched = torch.optim.lr_scheduler.LambdaLR(
            self.opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
        self.step = 0

    def _wrap(self, module):
        # every model that takes part in the step goes through DDP so all ranks see the same weights
        return DDP(module, broadcast_buffers=False)

    def log(self, msg):
        if self.rank == 0:
            print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)

    def kd_loss(self, s_logits, t_logits, y):
        T = self.args.temperature
        soft = F.kl_div(F.log_softmax(s_logits / T, dim=-1), F.softmax(t_logits / T, dim=-1),
                        reduction="batchmean") * T * T
        hard = F.cross_entropy(s_logits, y)
        return self.args.alpha * soft + (1 - self.args.alpha) * hard

    def train_epoch(self, epoch):
        self.student.train()
        self.train_sampler.set_epoch(epoch)
        running, n = 0.0, 0
        for x, y in self.train_loader:
            with torch.no_grad():
                t_logits = self.teacher(x)
            loss = self.kd_loss(self.student(x), t_logits, y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(self.student.parameters(), 1.0)
            self.opt.step()
            self.sched.step()
            self.step += 1
            running += loss.item() * len(x)
            n += len(x)
        stats = torch.tensor([running, n], dtype=torch.float64)
        dist.all_reduce(stats)
        return (stats[0] / stats[1]).item()

    @torch.no_grad()
    def evaluate(self):
        self.student.eval()
        stats = torch.zeros(3, dtype=torch.float64)  # student correct, teacher correct, count
        for x, y in self.val_loader:
            stats[0] += (self.student(x).argmax(-1) == y).sum()
            stats[1] += (self.teacher(x).argmax(-1) == y).sum()
            stats[2] += len(y)
        dist.all_reduce(stats)
        return (stats[0] / stats[2]).item(), (stats[1] / stats[2]).item()

    def fit(self):
        for epoch in range(self.args.epochs):
            t0 = time.time()
            train_loss = self.train_epoch(epoch)
            s_acc, t_acc = self.evaluate()
            self.log(f"epoch {epoch} loss {train_loss:.4f} student acc {s_acc:.3f} "
                     f"teacher acc {t_acc:.3f} lr {self.sched.get_last_lr()[0]:.2e} ({time.time() - t0:.1f}s)")
        if self.rank == 0:
            torch.save(self.student.module.state_dict(), os.path.join(HERE, "student.pt"))
            self.log("saved student.pt")


def main():
    args = get_args()
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    teacher, cfg = load_teacher(args.teacher)
    train_ds = make_data(args.n_train, cfg["d_in"], cfg["n_classes"], seed=1)
    val_ds = make_data(args.n_val, cfg["d_in"], cfg["n_classes"], seed=2)
    student = Student(cfg["d_in"], cfg["n_classes"])
    trainer = DistillTrainer(args, student, teacher, train_ds, val_ds)
    trainer.fit()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
