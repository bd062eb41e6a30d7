"""SimCLR-style contrastive pretraining of a tabular encoder on logs from two
product surfaces; per-surface loss is tracked for the dashboard."""
import logging

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from mlcore import is_primary, world_session
from mlcore.loop import batched, broadcast_parameters, shard_bounds, train_steps
from mlcore.metrics import DomainLoss

OPTS = {"n": 4096, "features": 48, "proj": 32, "batch": 128, "epochs": 3, "lr": 2e-3, "tau": 0.2,
        "web_frac": 0.6, "seed": 5}
DOMAINS = ("web", "mobile")
log = logging.getLogger("contrastive")


def load_sessions(o):
    """Sessions exported surface by surface (all web rows, then all mobile rows)."""
    rng = np.random.default_rng(o["seed"])
    n_web = int(o["n"] * o["web_frac"])
    dom = np.r_[np.zeros(n_web, np.int64), np.ones(o["n"] - n_web, np.int64)]
    X = (rng.normal(size=(o["n"], o["features"])) + dom[:, None] * 0.5).astype(np.float32)
    return torch.from_numpy(X), dom


def augment(x, g):
    mask = (torch.rand(x.shape, generator=g) > 0.2).float()
    return x * mask + 0.1 * torch.randn(x.shape, generator=g)


def nt_xent(z1, z2, tau):
    z = F.normalize(torch.cat([z1, z2]), dim=-1)
    sim = z @ z.T / tau
    sim.fill_diagonal_(float("-inf"))
    n = z1.shape[0]
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(0, n)])
    return F.cross_entropy(sim, target, reduction="none")


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    with world_session(timeout_s=30) as world:
        X, dom = load_sessions(OPTS)
        lo, hi = shard_bounds(len(X), world)
        X, dom = X[lo:hi], dom[lo:hi]

        torch.manual_seed(OPTS["seed"])
        enc = nn.Sequential(nn.Linear(OPTS["features"], 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                            nn.Linear(64, OPTS["proj"]))
        broadcast_parameters(enc)
        opt = torch.optim.Adam(enc.parameters(), lr=OPTS["lr"])
        tracker = DomainLoss(DOMAINS)
        g = torch.Generator().manual_seed(OPTS["seed"] + world.ordinal)

        def loss_fn(m, idx):
            x = X[idx]
            per = nt_xent(m(augment(x, g)), m(augment(x, g)), OPTS["tau"])
            per_sample = (per[: len(idx)] + per[len(idx):]) / 2
            tracker.update(per_sample.detach().numpy(), dom[idx.numpy()])
            return per_sample.mean()

        for epoch in range(OPTS["epochs"]):
            steps = list(train_steps(enc, opt, batched(len(X), OPTS["batch"], seed=OPTS["seed"], epoch=epoch), loss_fn))
            by_domain = tracker.compute()
            if is_primary():
                log.info("epoch %d (%d steps) loss by surface: %s", epoch, len(steps),
                         {k: round(v, 4) for k, v in by_domain.items()})


if __name__ == "__main__":
    main()
