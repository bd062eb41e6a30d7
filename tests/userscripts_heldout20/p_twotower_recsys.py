"""Two-tower retrieval model with in-batch negatives; exports live training metrics
for the cluster dashboard."""
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from mlcore import World, world_session
from mlcore.bus import EventBus
from mlcore.loop import batched, broadcast_parameters, train_steps
from mlcore.metrics import Mean
from mlcore.telemetry import REGISTRY, MetricsExporter

CFG = {"users": 2000, "items": 3000, "dim": 32, "interactions": 12000, "batch": 128, "epochs": 3,
       "lr": 5e-3, "temperature": 0.1, "metrics_port": 9464, "seed": 11}
log = logging.getLogger("twotower")


class Tower(nn.Module):
    def __init__(self, n, dim):
        super().__init__()
        self.emb = nn.Embedding(n, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, dim))

    def forward(self, ids):
        return F.normalize(self.mlp(self.emb(ids)), dim=-1)


class TwoTower(nn.Module):
    def __init__(self, users, items, dim):
        super().__init__()
        self.user, self.item = Tower(users, dim), Tower(items, dim)

    def forward(self, u, i):
        return self.user(u) @ self.item(i).T


def interactions(c):
    g = torch.Generator().manual_seed(c["seed"])
    u = torch.randint(0, c["users"], (c["interactions"],), generator=g)
    i = (u * 7 + torch.randint(0, 5, u.shape, generator=g)) % c["items"]  # users like "nearby" items
    return u, i


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    with world_session(timeout_s=30) as world:
        exporter = MetricsExporter(port=CFG["metrics_port"]).start(world)
        u, i = interactions(CFG)
        u, i = u[world.ordinal::world.size], i[world.ordinal::world.size]

        torch.manual_seed(CFG["seed"])
        model = TwoTower(CFG["users"], CFG["items"], CFG["dim"])
        broadcast_parameters(model)
        opt = torch.optim.Adam(model.parameters(), lr=CFG["lr"])
        bus = EventBus()
        bus.on("step_end", lambda loss, dt, **_: REGISTRY.set("train_loss", loss, worker=world.tag()))

        def loss_fn(m, idx):
            logits = m(u[idx], i[idx]) / CFG["temperature"]
            return F.cross_entropy(logits, torch.arange(len(idx)))

        for epoch in range(CFG["epochs"]):
            mean = Mean()
            t0 = time.time()
            for rec in train_steps(model, opt, batched(len(u), CFG["batch"], seed=CFG["seed"], epoch=epoch), loss_fn, bus=bus):
                mean.update(rec["loss"])
            loss = mean.compute()
            if world.coordinator:
                log.info("epoch %d in-batch softmax loss %.4f (%.1fs)", epoch, loss, time.time() - t0)
        exporter.stop()


if __name__ == "__main__":
    main()
