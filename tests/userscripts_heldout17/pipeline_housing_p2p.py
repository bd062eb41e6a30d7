"""Two-stage pipeline-parallel regressor for a (synthetic) housing-price table.

Stage "head" (feature tower) lives on one process, stage "tail" (regression
head + loss) on the other.  Each batch is cut into micro-batches; activations
go forward with isend/irecv and gradients come back the same way (GPipe-style
fill/drain).  Validation RMSE is computed on the tail and shared with
broadcast_object_list so both stages agree on when to checkpoint.

launch:  torchrun --nproc-per-node 2 pipeline_housing_p2p.py
"""
import argparse
import json
import logging
import math
import os
import shutil
import time
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from pipe_stages import HeadStage, TailStage, P2PLink

WORKDIR = "/tmp/ho17_pipe_housing"
STAGE_BY_RANK = {0: "head", 1: "tail"}
PEER_OF = {"head": 1, "tail": 0}

DEFAULT_CFG = {
    "n_train": 4096,
    "n_val": 1024,
    "features": 8,
    "hidden": 64,
    "boundary": 32,
    "batch_size": 256,
    "micro_batches": 4,
    "epochs": 6,
    "lr": 3e-3,
    "seed": 1234,
}

log = logging.getLogger("pipe")


def make_housing(n, features, seed):
    """Fake 'California housing'-like table: income, age, rooms, ... -> price."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, features)).astype(np.float32)
    income, age, rooms = X[:, 0], X[:, 1], X[:, 2]
    price = 2.0 * np.tanh(income) + 0.3 * age - 0.5 * rooms ** 2 / 4 + 0.4 * X[:, 3] * X[:, 4]
    price += rng.normal(scale=0.1, size=n)
    return torch.from_numpy(X), torch.from_numpy(price.astype(np.float32))


def batches(X, y, batch_size, n_micro, seed, epoch):
    """Yields lists of (x_mb, y_mb) micro-batches; identical on both stages."""
    g = torch.Generator().manual_seed(seed * 1000 + epoch)
    order = torch.randperm(len(X), generator=g)
    for start in range(0, len(order) - batch_size + 1, batch_size):
        idx = order[start:start + batch_size]
        yield list(zip(X[idx].chunk(n_micro), y[idx].chunk(n_micro)))


def load_config(path):
    with open(path) as f:
        cfg = json.load(f)
    missing = set(DEFAULT_CFG) - set(cfg)
    if missing:
        raise KeyError(f"config {path} is missing {sorted(missing)}")
    return argparse.Namespace(**cfg)


def train_epoch(stage, module, opt, link, cfg, X, y, epoch):
    module.train()
    running, nb = 0.0, 0
    for micro in batches(X, y, cfg.batch_size, cfg.micro_batches, cfg.seed, epoch):
        opt.zero_grad(set_to_none=True)
        if stage == "head":
            outs = []
            for mb, (xb, _) in enumerate(micro):
                h = module(xb)
                outs.append(h)
                link.post_activation(h, mb)
            for mb, h in enumerate(outs):
                g = link.recv_grad(h.shape[0], mb)
                h.backward(g)
        else:
            for mb, (_, yb) in enumerate(micro):
                h = link.recv_activation(yb.shape[0], mb).requires_grad_()
                pred = module(h)
                loss = F.mse_loss(pred, yb) / len(micro)
                loss.backward()
                link.post_grad(h.grad, mb)
                running += loss.item()
        link.drain()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        nb += 1
    return running / max(nb, 1)


@torch.no_grad()
def evaluate(stage, module, link, cfg, Xv, yv):
    module.eval()
    se, n = 0.0, 0
    for mb, (xb, yb) in enumerate(zip(Xv.split(cfg.batch_size), yv.split(cfg.batch_size))):
        if stage == "head":
            link.post_activation(module(xb), mb)
        else:
            pred = module(link.recv_activation(yb.shape[0], mb))
            se += F.mse_loss(pred, yb, reduction="sum").item()
            n += yb.numel()
    link.drain()
    box = [{"rmse": math.sqrt(se / n)} if stage == "tail" else None]
    dist.broadcast_object_list(box, src=PEER_OF["head"])
    return box[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default=os.path.join(WORKDIR, "config.json"))
    args = ap.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    if world != 2:
        raise SystemExit("this pipeline has exactly two stages; launch with 2 processes")
    stage = STAGE_BY_RANK[rank]
    logging.basicConfig(level=logging.INFO,
                        format=f"%(asctime)s [{stage}] %(levelname)s %(message)s")

    if stage == "head":
        shutil.rmtree(WORKDIR, ignore_errors=True)
        os.makedirs(WORKDIR)
        with open(args.config, "w") as f:
            json.dump(DEFAULT_CFG, f, indent=2)
    dist.barrier()
    cfg = load_config(args.config)
    torch.manual_seed(cfg.seed + rank)

    X, y = make_housing(cfg.n_train, cfg.features, cfg.seed)
    Xv, yv = make_housing(cfg.n_val, cfg.features, cfg.seed + 1)

    if stage == "head":
        module = HeadStage(cfg.features, cfg.hidden, cfg.boundary)
    else:
        module = TailStage(cfg.boundary, cfg.hidden)
    opt = torch.optim.AdamW(module.parameters(), lr=cfg.lr, weight_decay=1e-4)
    link = P2PLink(PEER_OF[stage], cfg.boundary)
    log.info("stage %s: %d params", stage, sum(p.numel() for p in module.parameters()))

    best = float("inf")
    for epoch in range(cfg.epochs):
        t0 = time.time()
        tr = train_epoch(stage, module, opt, link, cfg, X, y, epoch)
        metrics = evaluate(stage, module, link, cfg, Xv, yv)
        if stage == "tail":
            log.info("epoch %d train_mse %.4f", epoch, tr)
        log.info("epoch %d val_rmse %.4f (%.1fs)", epoch, metrics["rmse"], time.time() - t0)
        if metrics["rmse"] < best:
            best = metrics["rmse"]
            torch.save({"epoch": epoch, "stage": stage, "model": module.state_dict(),
                        "opt": opt.state_dict(), "val_rmse": best},
                       os.path.join(WORKDIR, f"stage_{stage}.pt"))
            dist.barrier()
            if stage == "head":
                with open(os.path.join(WORKDIR, "manifest.json"), "w") as f:
                    json.dump({"epoch": epoch, "val_rmse": best,
                               "stages": [f"stage_{s}.pt" for s in ("head", "tail")]}, f)

    # round-trip the checkpoint so a broken save shows up now, not at resume time
    state = torch.load(os.path.join(WORKDIR, f"stage_{stage}.pt"), weights_only=True)
    module.load_state_dict(state["model"])
    log.info("best val_rmse %.4f at epoch %d", state["val_rmse"], state["epoch"])
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
