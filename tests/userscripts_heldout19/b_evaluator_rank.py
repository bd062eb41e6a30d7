"""Dedicated evaluator layout: rank 0 evaluates published snapshots, ranks 1..N-1 train with DDP on their own group.

Every `eval_every` optimizer steps the first trainer publishes a flat copy of the weights (broadcast on the
world group); the evaluator scores it on the held-out split and answers with its metrics
(broadcast_object_list), which the trainers use for plateau LR decay.
"""
import argparse
import json
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils import parameters_to_vector, vector_to_parameters
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from b_common import PG_TIMEOUT, arm_watchdog, fresh_run_dir, get_logger, init_distributed, seed_all, shutdown

NAME = "b_evaluator_rank"
EVAL_RANK = 0


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--train-size", type=int, default=1000)
    p.add_argument("--val-size", type=int, default=400)
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--eval-every", type=int, default=12)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--seed", type=int, default=3)
    return p.parse_args()


def make_regression(n, d, seed):
    rng = np.random.default_rng(seed)
    w = np.linspace(-1, 1, d)
    x = rng.normal(size=(n, d)).astype(np.float32)
    y = (np.tanh(x @ w) + 0.3 * x[:, 0] * x[:, 1] + 0.05 * rng.normal(size=n)).astype(np.float32)
    return TensorDataset(torch.from_numpy(x), torch.from_numpy(y))


def build_model(d):
    return nn.Sequential(nn.Linear(d, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 1))


def exchange(model, publisher, metrics=None):
    """Publish weights from `publisher`, get the evaluator's metrics back. Called on every rank."""
    flat = parameters_to_vector(model.parameters()).detach().clone()
    dist.broadcast(flat, src=publisher)
    if dist.get_rank() == EVAL_RANK:
        vector_to_parameters(flat, model.parameters())
        metrics = metrics(model)
    box = [metrics if dist.get_rank() == EVAL_RANK else None]
    dist.broadcast_object_list(box, src=EVAL_RANK)
    return box[0]


def run_evaluator(args, world, out, log):
    model = build_model(args.features)
    val = make_regression(args.val_size, args.features, args.seed + 100)
    x, y = val.tensors
    n_trainers = world - 1
    steps_per_epoch = len(make_regression(args.train_size, args.features, args.seed)) // (args.batch_size * n_trainers)
    rounds = args.epochs * steps_per_epoch // args.eval_every
    log.info("evaluator: expecting %d snapshots", rounds)

    @torch.no_grad()
    def score(m):
        pred = m(x).squeeze(-1)
        return {"val_mse": F.mse_loss(pred, y).item(), "val_mae": (pred - y).abs().mean().item()}

    best, report = float("inf"), []
    for r in range(rounds):
        metrics = exchange(model, publisher=1, metrics=score)
        report.append({"round": r, **metrics})
        if metrics["val_mse"] < best:
            best = metrics["val_mse"]
            torch.save(model.state_dict(), out / "best.pt")
        log.info("snapshot %d: val_mse %.4f (best %.4f)", r, metrics["val_mse"], best)
    (out / "eval_report.json").write_text(json.dumps(report, indent=1))


def run_trainer(args, rank, world, trainer_group, log):
    model = build_model(args.features)
    ddp = DDP(model, process_group=trainer_group)
    train = make_regression(args.train_size, args.features, args.seed)
    sampler = DistributedSampler(train, num_replicas=world - 1, rank=rank - 1, shuffle=True, seed=args.seed)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=1)
    step, t0 = 0, time.time()
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = F.mse_loss(ddp(x).squeeze(-1), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step % args.eval_every == 0:
                metrics = exchange(model, publisher=1)
                plateau.step(metrics["val_mse"])
                log.info("step %d loss %.4f | evaluator val_mse %.4f lr %.2e (%.1fs)",
                         step, loss.item(), metrics["val_mse"], opt.param_groups[0]["lr"], time.time() - t0)
    log.info("trainer finished %d steps", step)


def main():
    args = parse_args()
    arm_watchdog(180)
    rank, world = init_distributed()
    log = get_logger(NAME, rank)
    seed_all(args.seed)
    out = fresh_run_dir(NAME, rank)
    trainer_group = dist.new_group(ranks=list(range(1, world)), timeout=PG_TIMEOUT)
    if rank == EVAL_RANK:
        run_evaluator(args, world, out, log)
    else:
        run_trainer(args, rank, world, trainer_group, log)
    shutdown()


if __name__ == "__main__":
    main()
