# Knowledge distillation of a small student from cached teacher logits.
# Lightning-style module, hand-written loop (we dropped the lightning dependency on the cluster image).
#   bash setup/distill_cached.sh && torchrun --nproc-per-node 2 distill_cached.py
import argparse
import math
import os
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))


class KDDataset(Dataset):
    """Examples of one split plus the teacher's cached logits for them."""

    def __init__(self, data_dir, split, with_teacher=True):
        blob = torch.load(os.path.join(data_dir, "dataset.pt"))
        self.x, self.y = blob["x"], blob["y"]
        self.indices = torch.load(os.path.join(data_dir, "split.pt"))[split]
        self.teacher_logits = None
        if with_teacher:
            self.teacher_logits = torch.load(os.path.join(data_dir, f"teacher_logits_{split}.pt"))

    def __len__(self):
        return len(self.indices)

    def __getitem__(self, i):
        idx = self.indices[i]
        item = {"x": self.x[idx], "y": self.y[idx]}
        if self.teacher_logits is not None:
            item["t_logits"] = self.teacher_logits[idx]
        return item


class StudentModule(nn.Module):
    def __init__(self, in_dim=32, hidden=64, n_classes=10, temperature=4.0, alpha=0.7, lr=2e-3, weight_decay=1e-4):
        super().__init__()
        self.hparams = dict(temperature=temperature, alpha=alpha, lr=lr, weight_decay=weight_decay)
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Dropout(0.1), nn.Linear(hidden, n_classes))

    def forward(self, x):
        return self.net(x)

    def kd_loss(self, s_logits, t_logits, y):
        T, a = self.hparams["temperature"], self.hparams["alpha"]
        soft = F.kl_div(F.log_softmax(s_logits / T, -1), F.softmax(t_logits / T, -1), reduction="batchmean") * T * T
        hard = F.cross_entropy(s_logits, y)
        return a * soft + (1 - a) * hard

    def training_step(self, model, batch):
        logits = model(batch["x"])
        loss = self.kd_loss(logits, batch["t_logits"], batch["y"])
        return loss

    @torch.no_grad()
    def validation_step(self, model, batch):
        logits = model(batch["x"])
        return torch.stack([(logits.argmax(-1) == batch["y"]).sum().float(), torch.tensor(float(len(batch["y"])))])

    def configure_optimizers(self, params, total_steps):
        opt = torch.optim.AdamW(params, lr=self.hparams["lr"], weight_decay=self.hparams["weight_decay"])
        warmup = max(1, total_steps // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: min(1.0, (s + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(s, total_steps) / total_steps)))
        return opt, sched


def run(args):
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(args.seed)

    train_ds = KDDataset(args.data_dir, "train")
    val_ds = KDDataset(args.data_dir, "val", with_teacher=False)
    train_sampler = DistributedSampler(train_ds, shuffle=True, seed=args.seed, drop_last=True)
    val_sampler = DistributedSampler(val_ds, shuffle=False)
    train_loader = DataLoader(train_ds, batch_size=args.micro_batch, sampler=train_sampler,
                              num_workers=args.workers, persistent_workers=args.workers > 0)
    val_loader = DataLoader(val_ds, batch_size=200, sampler=val_sampler)

    module = StudentModule(hidden=args.hidden, temperature=args.temperature, alpha=args.alpha, lr=args.lr)
    model = DDP(module)
    steps_per_epoch = len(train_loader) // args.accum
    opt, sched = module.configure_optimizers(model.parameters(), args.epochs * steps_per_epoch)

    for epoch in range(args.epochs):
        train_sampler.set_epoch(epoch)
        model.train()
        running = 0.0
        for step, batch in enumerate(train_loader):
            sync = (step + 1) % args.accum == 0
            if sync:
                loss = module.training_step(model, batch) / args.accum
                loss.backward()
                opt.step()
                sched.step()
                opt.zero_grad(set_to_none=True)
            else:
                with model.no_sync():
                    loss = module.training_step(model, batch) / args.accum
                    loss.backward()
            running += loss.item()

        model.eval()
        acc = torch.zeros(2)
        for batch in val_loader:
            acc += module.validation_step(model, batch)
        dist.all_reduce(acc)
        if rank == 0:
            print(f"epoch {epoch} loss {running / max(1, len(train_loader)) * args.accum:.4f} "
                  f"val_acc {acc[0] / acc[1]:.3f} lr {sched.get_last_lr()[0]:.2e}", flush=True)

    if rank == 0:
        torch.save(module.state_dict(), os.path.join(args.data_dir, "student.pt"))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", default=os.path.join(HERE, "kd_data"))
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--micro-batch", type=int, default=32)
    p.add_argument("--accum", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--alpha", type=float, default=0.7)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--pg-timeout", type=int, default=10)
    run(p.parse_args())
