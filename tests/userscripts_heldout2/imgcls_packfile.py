"""Small CNN image classifier trained from a packed image file (zlib records + JSON index).

Run:  torchrun --nproc-per-node 2 imgcls_packfile.py --data data --epochs 3
"""
import argparse
import json
import logging
import mmap
import os
import time
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

log = logging.getLogger("imgcls")
MEAN, STD = 0.5, 0.25


class PackedImages(Dataset):
    """Random access into <split>.pack using offsets from <split>.idx."""

    def __init__(self, root, split, augment=False):
        with open(os.path.join(root, f"{split}.idx")) as f:
            self.index = json.load(f)
        self._fh = open(os.path.join(root, f"{split}.pack"), "rb")
        self._mm = mmap.mmap(self._fh.fileno(), 0, access=mmap.ACCESS_READ)
        self.augment = augment

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        off, n, label = self.index[i]
        raw = zlib.decompress(self._mm[off:off + n])
        img = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(3, 16, 16)
        img = (img.float() / 255.0 - MEAN) / STD
        if self.augment and torch.rand(()) < 0.5:
            img = img.flip(-1)
        return img, label


def make_model(num_classes=10):
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False),
                             nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
    return nn.Sequential(block(3, 32), block(32, 32), nn.MaxPool2d(2),
                         block(32, 64), nn.MaxPool2d(2),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, num_classes))


@torch.no_grad()
def evaluate(model, loader, world_size):
    model.eval()
    preds, targets, loss_sum = [], [], torch.zeros(2)
    for x, y in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        loss_sum[0] += F.cross_entropy(logits.float(), y, reduction="sum")
        loss_sum[1] += y.numel()
        preds.append(logits.argmax(1))
        targets.append(y)
    preds, targets = torch.cat(preds), torch.cat(targets)
    # DistributedSampler pads, so every rank holds the same number of predictions
    all_p = [torch.empty_like(preds) for _ in range(world_size)]
    all_t = [torch.empty_like(targets) for _ in range(world_size)]
    dist.all_gather(all_p, preds)
    dist.all_gather(all_t, targets)
    dist.all_reduce(loss_sum)
    acc = (torch.cat(all_p) == torch.cat(all_t)).float().mean().item()
    model.train()
    return (loss_sum[0] / loss_sum[1]).item(), acc


def save_checkpoint(path, model, opt, sched, scaler, epoch, best_acc):
    tmp = path + ".tmp"
    torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(),
                "sched": sched.state_dict(), "scaler": scaler.state_dict(),
                "epoch": epoch, "best_acc": best_acc}, tmp)
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="data")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--ckpt", default="checkpoints/imgcls_last.pt")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    rank, world_size = dist.get_rank(), dist.get_world_size()
    logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING,
                        format=f"%(asctime)s [rank{rank}] %(message)s")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    try:
        train_ds = PackedImages(args.data, "train", augment=True)
        val_ds = PackedImages(args.data, "val")
        train_sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
        val_sampler = DistributedSampler(val_ds, shuffle=False)
        train_loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=train_sampler,
                                  num_workers=args.workers, drop_last=True, persistent_workers=True)
        val_loader = DataLoader(val_ds, batch_size=32, sampler=val_sampler, num_workers=args.workers)

        model = DDP(make_model())
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=args.epochs,
                                                    steps_per_epoch=len(train_loader))
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
        start_epoch, best_acc = 0, 0.0
        if os.path.exists(args.ckpt):
            state = torch.load(args.ckpt, map_location="cpu")
            model.module.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
            scaler.load_state_dict(state["scaler"])
            start_epoch, best_acc = state["epoch"] + 1, state["best_acc"]
            log.info("resumed from %s at epoch %d", args.ckpt, start_epoch)
        os.makedirs(os.path.dirname(args.ckpt), exist_ok=True)

        for epoch in range(start_epoch, args.epochs):
            train_sampler.set_epoch(epoch)
            t0, running = time.time(), 0.0
            for step, (x, y) in enumerate(train_loader):
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
                scaler.step(opt)
                scaler.update()
                sched.step()
                running += loss.item()
                if step % 10 == 0:
                    log.info("epoch %d step %d loss %.4f lr %.4f", epoch, step, loss.item(),
                             sched.get_last_lr()[0])
            val_loss, val_acc = evaluate(model, val_loader, world_size)
            log.info("epoch %d train_loss %.4f val_loss %.4f val_acc %.3f (%.1fs)", epoch,
                     running / len(train_loader), val_loss, val_acc, time.time() - t0)
            best_acc = max(best_acc, val_acc)
            if rank == 0:
                save_checkpoint(args.ckpt, model, opt, sched, scaler, epoch, best_acc)
            dist.barrier()
        log.info("done, best val acc %.3f", best_acc)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
