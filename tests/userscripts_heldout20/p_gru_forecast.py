"""Multi-series load forecasting with a GRU; mlcore loop, DCP checkpoints, and a
separate gloo group for metric traffic."""
import logging
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.elastic.multiprocessing.errors import record

from mlcore import World, is_primary, world_session
from mlcore import storage
from mlcore.bus import EventBus
from mlcore.loop import average_gradients, batched, broadcast_parameters

HP = {"series": 512, "length": 96, "horizon": 12, "hidden": 64, "batch": 32, "epochs": 4, "lr": 3e-3, "seed": 9}
log = logging.getLogger("gru")


def make_series(n, length, seed):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(length).float()
    period = torch.randint(12, 48, (n, 1), generator=g).float()
    phase = torch.rand(n, 1, generator=g) * 2 * math.pi
    trend = torch.randn(n, 1, generator=g) * 0.01
    return torch.sin(2 * math.pi * t / period + phase) + trend * t + 0.1 * torch.randn(n, length, generator=g)


class Forecaster(nn.Module):
    def __init__(self, hidden, horizon):
        super().__init__()
        self.gru = nn.GRU(1, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, horizon)

    def forward(self, x):
        h, _ = self.gru(x.unsqueeze(-1))
        return self.out(h[:, -1])


@record
def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    with world_session(timeout_s=30) as world:
        metrics_pg = dist.new_group(ranks=list(range(world.size)), backend="gloo")
        run = [f"gru-{int(time.time())}" if is_primary() else None]
        dist.broadcast_object_list(run, src=0)
        ckdir = os.path.join("ckpt_gru", run[0])

        data = make_series(HP["series"], HP["length"] + HP["horizon"], HP["seed"])
        data = data[world.ordinal::world.size]
        x, y = data[:, : HP["length"]], data[:, HP["length"]:]

        torch.manual_seed(HP["seed"])
        model = Forecaster(HP["hidden"], HP["horizon"])
        broadcast_parameters(model)
        opt = torch.optim.Adam(model.parameters(), lr=HP["lr"])
        bus = EventBus()

        @bus.on("epoch_end")
        def _log(epoch, loss):
            t = torch.tensor([loss])
            dist.all_reduce(t, group=metrics_pg)
            if world.coordinator:
                log.info("epoch %d mse %.4f", epoch, t.item() / world.size)

        for epoch in range(HP["epochs"]):
            tot, n = 0.0, 0
            for idx in batched(len(x), HP["batch"], seed=HP["seed"], epoch=epoch):
                opt.zero_grad(set_to_none=True)
                loss = F.mse_loss(model(x[idx]), y[idx])
                loss.backward()
                average_gradients(model)
                opt.step()
                tot, n = tot + loss.item(), n + 1
            bus.emit("epoch_end", epoch=epoch, loss=tot / n)
            if epoch == HP["epochs"] // 2 - 1:
                storage.save(ckdir, model, opt)
                if world.coordinator:
                    log.info("saved DCP checkpoint to %s", ckdir)

        # sanity check: restore the mid-run checkpoint into a fresh model
        fresh = Forecaster(HP["hidden"], HP["horizon"])
        fresh_opt = torch.optim.Adam(fresh.parameters(), lr=HP["lr"])
        storage.load_into(ckdir, fresh, fresh_opt)
        with torch.no_grad():
            mid, final = F.mse_loss(fresh(x), y).item(), F.mse_loss(model(x), y).item()
        t = torch.tensor([mid, final])
        dist.all_reduce(t, group=metrics_pg)
        if world.coordinator:
            log.info("restored mid-run mse %.4f vs final %.4f", t[0] / world.size, t[1] / world.size)


if __name__ == "__main__":
    main()
