"""Keyword spotting on synthetic waveforms (1-D CNN), hand-rolled DDP via mlcore,
with the hang watchdog that production jobs run with."""
import logging
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from mlcore import World, world_session
from mlcore.bus import EventBus
from mlcore.loop import batched, broadcast_parameters, train_steps
from mlcore.watchdog import HangWatchdog

HP = {"n_clips": 2048, "clip_len": 16000, "n_keywords": 6, "batch": 32, "epochs": 10, "lr": 1e-3,
      "log_every": 10, "hang_timeout_s": 8.0, "seed": 3}
log = logging.getLogger("kws")


def synth_clips(n, length, n_kw, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, n_kw, (n,), generator=g)
    t = torch.arange(length) / 16000.0
    f0 = 300 + 150 * y.float()
    onset = torch.randint(0, length // 2, (n,), generator=g)
    env = ((torch.arange(length)[None] >= onset[:, None]) & (torch.arange(length)[None] < onset[:, None] + length // 3)).float()
    wave = env * torch.sin(2 * math.pi * f0[:, None] * t[None]) + 0.5 * torch.randn(n, length, generator=g)
    return wave.unsqueeze(1), y


class KWSNet(nn.Module):
    def __init__(self, n_kw):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, 16, 80, stride=8), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(16, 32, 5), nn.ReLU(), nn.MaxPool1d(4),
            nn.Conv1d(32, 32, 5), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
        )
        self.fc = nn.Linear(32, n_kw)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


def main():
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    with world_session(timeout_s=30) as world:
        waves, labels = synth_clips(HP["n_clips"], HP["clip_len"], HP["n_keywords"], HP["seed"])
        mine = torch.arange(world.ordinal, HP["n_clips"], world.size)
        waves, labels = waves[mine], labels[mine]

        torch.manual_seed(HP["seed"])
        model = KWSNet(HP["n_keywords"])
        broadcast_parameters(model)
        opt = torch.optim.Adam(model.parameters(), lr=HP["lr"])

        bus = EventBus()
        dog = HangWatchdog(HP["hang_timeout_s"]).attach(bus).start()

        @bus.on("log")
        def _print(step, loss, dt, **_):
            log.info("step %d loss %.4f (%.0f ms/step)", step, loss, dt * 1e3)

        def loss_fn(m, idx):
            return F.cross_entropy(m(waves[idx]), labels[idx])

        gstep = 0
        for epoch in range(HP["epochs"]):
            for rec in train_steps(model, opt, batched(len(labels), HP["batch"], seed=HP["seed"], epoch=epoch),
                                   loss_fn, bus=bus):
                gstep += 1
                if world.coordinator and gstep % HP["log_every"] == 0:
                    bus.emit("log", **{**rec, "step": gstep})
        dog.stop()
        with torch.no_grad():
            acc = (model(waves).argmax(-1) == labels).float().mean().item()
        if world.coordinator:
            log.info("done: %d steps, local train acc %.3f", gstep, acc)


if __name__ == "__main__":
    main()
