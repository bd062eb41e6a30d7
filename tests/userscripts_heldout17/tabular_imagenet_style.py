"""Tabular classifier trained with the structure of pytorch/examples imagenet/main.py.

We started from the ImageNet example (AverageMeter, ProgressMeter,
save_checkpoint / model_best, the --dist-url / --multiprocessing-distributed
setup), swapped the CNN for an MLP and the image folder for a synthetic
tabular set, and launch it with torchrun instead of mp.spawn.
"""
import argparse
import os
import random
import shutil
import time
import warnings
from datetime import timedelta
from enum import Enum

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim
import torch.utils.data
import torch.utils.data.distributed
from sklearn.datasets import make_classification

parser = argparse.ArgumentParser(description="PyTorch Tabular Training")
parser.add_argument("--data-dir", default="/tmp/ho17_tabular_imnet", help="where the cached dataset lives")
parser.add_argument("-j", "--workers", default=0, type=int, metavar="N")
parser.add_argument("--epochs", default=5, type=int, metavar="N")
parser.add_argument("--start-epoch", default=0, type=int, metavar="N")
parser.add_argument("-b", "--batch-size", default=128, type=int, metavar="N",
                    help="total batch size across all processes")
parser.add_argument("--lr", "--learning-rate", default=0.05, type=float, metavar="LR", dest="lr")
parser.add_argument("--momentum", default=0.9, type=float, metavar="M")
parser.add_argument("--wd", "--weight-decay", default=1e-4, type=float, metavar="W", dest="weight_decay")
parser.add_argument("-p", "--print-freq", default=20, type=int, metavar="N")
parser.add_argument("--resume", default="", type=str, metavar="PATH")
parser.add_argument("--world-size", default=-1, type=int, help="number of nodes for distributed training")
parser.add_argument("--rank", default=-1, type=int, help="node rank for distributed training")
parser.add_argument("--dist-url", default="env://", type=str, help="url used to set up distributed training")
parser.add_argument("--dist-backend", default="gloo", type=str, help="distributed backend")
parser.add_argument("--multiprocessing-distributed", action="store_true",
                    help="Use multi-processing distributed training to launch "
                         "N processes per node, which has N devices. This is the "
                         "fastest way to use PyTorch for either single node or "
                         "multi node data parallel training")
parser.add_argument("--seed", default=17, type=int, help="seed for initializing training.")

best_acc1 = 0


# what we always launch with on the cluster
parser.set_defaults(multiprocessing_distributed=True)


def main():
    args = parser.parse_args()
    if args.seed is not None:
        random.seed(args.seed)
        torch.manual_seed(args.seed)
        warnings.warn("You have chosen to seed training. This will turn on deterministic "
                      "behaviour, which can slow down your training considerably!")

    if args.dist_url == "env://" and args.world_size == -1:
        args.world_size = int(os.environ["WORLD_SIZE"])
    args.distributed = args.world_size > 1 or args.multiprocessing_distributed

    # CPU nodes: one worker process per "device"
    ngpus_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", 1))
    if args.multiprocessing_distributed:
        # Since we have ngpus_per_node processes per node, the total world_size
        # needs to be adjusted accordingly
        args.world_size = ngpus_per_node * args.world_size
    main_worker(int(os.environ.get("LOCAL_RANK", 0)), ngpus_per_node, args)


def main_worker(gpu, ngpus_per_node, args):
    global best_acc1
    args.gpu = gpu
    if args.distributed:
        if args.dist_url == "env://" and args.rank == -1:
            args.rank = int(os.environ["RANK"])
        if args.multiprocessing_distributed:
            # For multiprocessing distributed training, rank needs to be the
            # global rank among all the processes
            args.rank = args.rank * ngpus_per_node + gpu
        print(f"=> rank {args.rank}/{args.world_size}: init {args.dist_backend} via {args.dist_url}", flush=True)
        dist.init_process_group(backend=args.dist_backend, init_method=args.dist_url,
                                world_size=args.world_size, rank=args.rank,
                                timeout=timedelta(seconds=30))

    train_ds, val_ds = get_datasets(args)
    model = nn.Sequential(nn.Linear(40, 256), nn.BatchNorm1d(256), nn.ReLU(), nn.Dropout(0.2),
                          nn.Linear(256, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Linear(128, 6))
    if args.distributed:
        model = torch.nn.parallel.DistributedDataParallel(model)
        args.batch_size = int(args.batch_size / args.world_size)

    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.3)

    if args.resume and os.path.isfile(args.resume):
        print(f"=> loading checkpoint '{args.resume}'")
        checkpoint = torch.load(args.resume, weights_only=False)
        args.start_epoch = checkpoint["epoch"]
        best_acc1 = checkpoint["best_acc1"]
        model.load_state_dict(checkpoint["state_dict"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])

    if args.distributed:
        train_sampler = torch.utils.data.distributed.DistributedSampler(train_ds)
        val_sampler = torch.utils.data.distributed.DistributedSampler(val_ds, shuffle=False, drop_last=True)
    else:
        train_sampler = val_sampler = None
    train_loader = torch.utils.data.DataLoader(train_ds, batch_size=args.batch_size,
                                               shuffle=(train_sampler is None), num_workers=args.workers,
                                               sampler=train_sampler)
    val_loader = torch.utils.data.DataLoader(val_ds, batch_size=args.batch_size, shuffle=False,
                                             num_workers=args.workers, sampler=val_sampler)

    for epoch in range(args.start_epoch, args.epochs):
        if args.distributed:
            train_sampler.set_epoch(epoch)
        train(train_loader, model, criterion, optimizer, epoch, args)
        acc1 = validate(val_loader, model, criterion, args)
        scheduler.step()
        is_best = acc1 > best_acc1
        best_acc1 = max(acc1, best_acc1)
        if not args.distributed or args.rank == 0:
            save_checkpoint({"epoch": epoch + 1, "state_dict": model.state_dict(), "best_acc1": best_acc1,
                             "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()},
                            is_best, os.path.join(args.data_dir, "checkpoint.pth.tar"))
    if args.distributed:
        dist.destroy_process_group()


def get_datasets(args):
    os.makedirs(args.data_dir, exist_ok=True)
    X, y = make_classification(n_samples=6000, n_features=40, n_informative=24, n_redundant=8,
                               n_classes=6, n_clusters_per_class=2, class_sep=1.2, random_state=args.seed)
    X = torch.tensor(X, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.long)
    return (torch.utils.data.TensorDataset(X[:5000], y[:5000]),
            torch.utils.data.TensorDataset(X[5000:], y[5000:]))


def train(train_loader, model, criterion, optimizer, epoch, args):
    batch_time = AverageMeter("Time", ":6.3f")
    losses = AverageMeter("Loss", ":.4e")
    top1 = AverageMeter("Acc@1", ":6.2f")
    progress = ProgressMeter(len(train_loader), [batch_time, losses, top1], prefix=f"Epoch: [{epoch}]")
    model.train()
    end = time.time()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        acc1, = accuracy(output, target, topk=(1,))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1[0], images.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        batch_time.update(time.time() - end)
        end = time.time()
        if i % args.print_freq == 0:
            progress.display(i + 1)


def validate(val_loader, model, criterion, args):
    losses = AverageMeter("Loss", ":.4e", Summary.NONE)
    top1 = AverageMeter("Acc@1", ":6.2f", Summary.AVERAGE)
    model.eval()
    with torch.no_grad():
        for images, target in val_loader:
            output = model(images)
            loss = criterion(output, target)
            acc1, = accuracy(output, target, topk=(1,))
            losses.update(loss.item(), images.size(0))
            top1.update(acc1[0], images.size(0))
    if args.distributed:
        top1.all_reduce()
        losses.all_reduce()
    print(f" * Acc@1 {top1.avg:.3f} Loss {losses.avg:.4f}", flush=True)
    return top1.avg


def save_checkpoint(state, is_best, filename):
    torch.save(state, filename)
    if is_best:
        shutil.copyfile(filename, os.path.join(os.path.dirname(filename), "model_best.pth.tar"))


class Summary(Enum):
    NONE = 0
    AVERAGE = 1


class AverageMeter:
    def __init__(self, name, fmt=":f", summary_type=Summary.AVERAGE):
        self.name, self.fmt, self.summary_type = name, fmt, summary_type
        self.reset()

    def reset(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = float(val)
        self.sum += float(val) * n
        self.count += n
        self.avg = self.sum / self.count

    def all_reduce(self):
        total = torch.tensor([self.sum, self.count], dtype=torch.float32)
        dist.all_reduce(total, dist.ReduceOp.SUM, async_op=False)
        self.sum, self.count = total.tolist()
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = "{name} {val" + self.fmt + "} ({avg" + self.fmt + "})"
        return fmtstr.format(**self.__dict__)


class ProgressMeter:
    def __init__(self, num_batches, meters, prefix=""):
        n = len(str(num_batches))
        self.batch_fmtstr = "[{:" + str(n) + "d}/" + "{:" + str(n) + "d}]"
        self.meters, self.prefix, self.num_batches = meters, prefix, num_batches

    def display(self, batch):
        entries = [self.prefix + self.batch_fmtstr.format(batch, self.num_batches)]
        entries += [str(m) for m in self.meters]
        print("\t".join(entries), flush=True)


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


if __name__ == "__main__":
    main()
