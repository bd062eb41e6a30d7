"""Two-stage pipeline (stage 0 = encoder on rank 0, stage 1 = classifier head on rank 1) with batch_isend_irecv.

Semi-supervised sensor classification: curated rows carry labels, crawled rows do not (label -1).
From epoch `--unsup-from` on, unlabelled rows add an entropy-minimisation term.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from b_common import arm_watchdog, fresh_run_dir, get_logger, init_distributed, seed_all, shutdown

NAME = "b_pipe_semisup"
UNLABELLED = -1


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--features", type=int, default=24)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--curated", type=int, default=896)
    p.add_argument("--crawled", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--unsup-from", type=int, default=1)
    p.add_argument("--unsup-weight", type=float, default=0.1)
    p.add_argument("--lr", type=float, default=1e-2)
    p.add_argument("--seed", type=int, default=5)
    return p.parse_args()


def make_data(args):
    """Rows in export order: curated.csv first, then crawl.csv (both stages build the same tensors)."""
    rng = np.random.default_rng(args.seed)
    centers = rng.normal(0, 2.0, size=(args.classes, args.features))
    def draw(n):
        y = rng.integers(0, args.classes, size=n)
        return centers[y] + rng.normal(0, 1.0, size=(n, args.features)), y
    xc, yc = draw(args.curated)
    xu, _ = draw(args.crawled)
    x = np.concatenate([xc, xu]).astype(np.float32)
    y = np.concatenate([yc, np.full(args.crawled, UNLABELLED)]).astype(np.int64)
    xv, yv = draw(256)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), TensorDataset(torch.from_numpy(xv.astype(np.float32)), torch.from_numpy(yv))


def p2p(op, tensor, peer):
    for req in dist.batch_isend_irecv([dist.P2POp(op, tensor, peer)]):
        req.wait()


def stage0_step(enc, opt, x, peer, hidden):
    h = enc(x)
    p2p(dist.isend, h.detach().contiguous(), peer)
    grad = torch.empty(x.size(0), hidden)
    p2p(dist.irecv, grad, peer)
    opt.zero_grad(set_to_none=True)
    h.backward(grad)
    opt.step()


def semisup_loss(logits, y, use_unsup, weight):
    lab = y != UNLABELLED
    parts = []
    if lab.any():
        parts.append(F.cross_entropy(logits[lab], y[lab]))
    if use_unsup and (~lab).any():
        p = logits[~lab].softmax(-1)
        parts.append(weight * -(p * p.clamp_min(1e-8).log()).sum(-1).mean())
    return sum(parts) if parts else None


def main():
    args = parse_args()
    arm_watchdog(180)
    rank, world = init_distributed()
    log = get_logger(NAME, rank)
    seed_all(args.seed)
    out = fresh_run_dir(NAME, rank)
    peer = 1 - rank
    train_ds, val_ds = make_data(args)
    loader = DataLoader(train_ds, batch_size=args.batch_size, shuffle=False)
    val_loader = DataLoader(val_ds, batch_size=128)

    if rank == 0:
        stage = nn.Sequential(nn.Linear(args.features, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.hidden), nn.ReLU())
    else:
        stage = nn.Sequential(nn.Linear(args.hidden, args.hidden), nn.ReLU(), nn.Linear(args.hidden, args.classes))
    opt = torch.optim.SGD(stage.parameters(), lr=args.lr, momentum=0.9)
    history, t0 = [], time.time()

    for epoch in range(args.epochs):
        stage.train()
        use_unsup = epoch >= args.unsup_from
        losses = []
        for step, (x, y) in enumerate(loader):
            if rank == 0:
                stage0_step(stage, opt, x, peer, args.hidden)
                continue
            act = torch.empty(x.size(0), args.hidden)
            p2p(dist.irecv, act, peer)
            act.requires_grad_(True)
            loss = semisup_loss(stage(act), y, use_unsup, args.unsup_weight)
            if loss is None:
                log.warning("step %d: batch has no usable rows, skipping update", step)
                continue
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            p2p(dist.isend, act.grad.contiguous(), peer)
            losses.append(loss.item())

        stage.eval()
        correct = torch.zeros(1)
        with torch.no_grad():
            for xv, yv in val_loader:
                if rank == 0:
                    p2p(dist.isend, stage(xv).contiguous(), peer)
                else:
                    act = torch.empty(xv.size(0), args.hidden)
                    p2p(dist.irecv, act, peer)
                    correct += (stage(act).argmax(-1) == yv).sum()
        dist.broadcast(correct, src=1)
        acc = correct.item() / len(val_ds)
        if rank == 1:
            history.append({"epoch": epoch, "loss": float(np.mean(losses)), "val_acc": acc, "elapsed": time.time() - t0})
            log.info("epoch %d loss %.4f val_acc %.4f", epoch, np.mean(losses), acc)
        torch.save(stage.state_dict(), out / f"stage{rank}.pt")
        dist.barrier()

    if rank == 1:
        (out / "history.json").write_text(json.dumps(history, indent=1))
    shutdown()


if __name__ == "__main__":
    main()
