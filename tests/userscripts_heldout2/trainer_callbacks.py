"""Tabular regression with a small Trainer + callbacks (live metrics, checkpoints), DDP/gloo."""
import argparse
import json
import os
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class Callback:
    def on_train_begin(self, trainer): pass
    def on_step_end(self, trainer, loss): pass
    def on_epoch_end(self, trainer, metrics): pass
    def on_train_end(self, trainer): pass


class PrintLogger(Callback):
    def on_step_end(self, trainer, loss):
        if trainer.rank == 0 and trainer.step % 20 == 0:
            print(f"step {trainer.step:4d} loss {loss:.4f} lr {trainer.sched.get_last_lr()[0]:.2e}", flush=True)

    def on_epoch_end(self, trainer, metrics):
        if trainer.rank == 0:
            print(f"epoch {trainer.epoch} " + json.dumps(metrics), flush=True)


class LiveMetricsServer(Callback):
    """Serves the latest metrics as JSON on http://host:port/metrics for the dashboard."""

    def __init__(self, port):
        self.port, self.latest, self.httpd = port, {}, None

    def on_train_begin(self, trainer):
        cb = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps(cb.latest).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        self.httpd = ThreadingHTTPServer(("0.0.0.0", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def on_step_end(self, trainer, loss):
        self.latest = {"step": trainer.step, "loss": loss, "time": time.time()}

    def on_train_end(self, trainer):
        if self.httpd is not None:
            self.httpd.shutdown()


class Checkpointer(Callback):
    def __init__(self, path):
        self.path = path

    def on_epoch_end(self, trainer, metrics):
        if trainer.rank == 0:
            tmp = self.path + ".tmp"
            torch.save({"model": trainer.model.module.state_dict(), "opt": trainer.opt.state_dict(),
                        "sched": trainer.sched.state_dict(), "epoch": trainer.epoch, "step": trainer.step}, tmp)
            os.replace(tmp, self.path)
        dist.barrier()


class Trainer:
    def __init__(self, model, train_ds, val_ds, args, callbacks):
        self.rank, self.world, self.args = dist.get_rank(), dist.get_world_size(), args
        self.model = DDP(model)
        self.opt = torch.optim.SGD(self.model.parameters(), lr=args.lr, momentum=0.9)
        self.sampler = DistributedSampler(train_ds, shuffle=True, seed=0)
        self.loader = DataLoader(train_ds, batch_size=args.batch_size, sampler=self.sampler, drop_last=True)
        self.val_loader = DataLoader(val_ds, batch_size=128, sampler=DistributedSampler(val_ds, shuffle=False))
        self.sched = torch.optim.lr_scheduler.CosineAnnealingLR(self.opt, T_max=args.epochs * len(self.loader))
        self.callbacks, self.step, self.epoch, self.start_epoch = callbacks, 0, 0, 0

    def _fire(self, event, *a):
        for cb in self.callbacks:
            getattr(cb, event)(self, *a)

    def maybe_resume(self, path):
        if os.path.exists(path):
            ck = torch.load(path, map_location="cpu")
            self.model.module.load_state_dict(ck["model"])
            self.opt.load_state_dict(ck["opt"])
            self.sched.load_state_dict(ck["sched"])
            self.start_epoch, self.step = ck["epoch"] + 1, ck["step"]

    @torch.no_grad()
    def validate(self):
        self.model.eval()
        errs = torch.cat([(self.model(x).squeeze(-1) - y) ** 2 for x, y in self.val_loader])
        gathered = [torch.zeros_like(errs) for _ in range(self.world)]
        dist.all_gather(gathered, errs)
        self.model.train()
        return {"val_mse": torch.cat(gathered).mean().item()}

    def fit(self):
        self._fire("on_train_begin")
        for self.epoch in range(self.start_epoch, self.args.epochs):
            self.sampler.set_epoch(self.epoch)
            for x, y in self.loader:
                loss = nn.functional.mse_loss(self.model(x).squeeze(-1), y)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.sched.step()
                self.step += 1
                self._fire("on_step_end", loss.item())
            self._fire("on_epoch_end", self.validate())
        self._fire("on_train_end")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--metrics-port", type=int, default=9187)
    p.add_argument("--ckpt", default="ckpt/last.pt")
    p.add_argument("--pg-timeout", type=int, default=10)
    args = p.parse_args()

    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    try:
        torch.manual_seed(1234)
        x = torch.randn(2048, 16)
        y = x[:, :4].sum(1) - 0.5 * x[:, 4] * x[:, 5] + 0.1 * torch.randn(2048)
        train_ds, val_ds = TensorDataset(x[:1792], y[:1792]), TensorDataset(x[1792:], y[1792:])
        model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
        os.makedirs(os.path.dirname(args.ckpt), exist_ok=True)
        callbacks = [PrintLogger(), LiveMetricsServer(args.metrics_port), Checkpointer(args.ckpt)]
        trainer = Trainer(model, train_ds, val_ds, args, callbacks)
        trainer.maybe_resume(args.ckpt)
        trainer.fit()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
