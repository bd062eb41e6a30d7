"""Small HF-style trainer: TrainingArguments dataclass, callbacks, an async
checkpoint writer thread on the main process, per-rank heartbeat files and a
wall-clock budget whose stop decision is agreed across ranks.

    torchrun --nproc-per-node 2 async_ckpt_trainer.py --max-train-seconds 12
"""
import json
import os
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
import argparse
from dataclasses import fields


@dataclass
class TrainingArguments:
    output_dir: str = "runs/async"
    max_train_seconds: float = 12.0
    max_steps: int = 100000
    per_device_batch_size: int = 64
    learning_rate: float = 2e-3
    save_steps: int = 150
    logging_steps: int = 100
    heartbeat_seconds: float = 2.0
    stop_check_steps: int = 20
    pg_timeout: int = 10
    tags: list = field(default_factory=lambda: ["smoke"])


def parse_dataclass_args(cls):
    """Tiny stand-in for HfArgumentParser: one --flag per dataclass field."""
    p = argparse.ArgumentParser()
    for f in fields(cls):
        if f.type is list or f.type == "list":
            p.add_argument(f"--{f.name.replace('_', '-')}", nargs="*", default=f.default_factory())
        else:
            p.add_argument(f"--{f.name.replace('_', '-')}", type=f.type, default=f.default)
    return cls(**vars(p.parse_args()))


class AsyncCheckpointWriter:
    """Copies the state to CPU on the caller thread, writes it on a worker thread."""

    def __init__(self, out_dir):
        self.out_dir = out_dir
        self.q = queue.Queue(maxsize=1)
        self.error = None
        self.thread = threading.Thread(target=self._run, name="ckpt-writer", daemon=True)
        self.thread.start()

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                self.q.task_done()
                return
            step, state = item
            try:
                path = os.path.join(self.out_dir, f"checkpoint-{step}")
                os.makedirs(path, exist_ok=True)
                torch.save(state, os.path.join(path, "state.pt.tmp"))
                os.replace(os.path.join(path, "state.pt.tmp"), os.path.join(path, "state.pt"))
                with open(os.path.join(path, "COMPLETE"), "w") as f:
                    f.write(str(step))
            except Exception as e:  # surfaced on the next submit / close
                self.error = e
            finally:
                self.q.task_done()

    def submit(self, step, model, opt):
        if self.error:
            raise RuntimeError("previous async checkpoint failed") from self.error
        state = {"step": step,
                 "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
                 "optim": opt.state_dict()}
        self.q.put((step, state))  # blocks while the previous write is still running

    def close(self):
        self.q.put(None)
        self.q.join()
        if self.error:
            raise RuntimeError("async checkpoint failed") from self.error


class Callback:
    def on_step_end(self, trainer, step, loss): ...
    def on_train_end(self, trainer): ...


class LoggingCallback(Callback):
    def on_step_end(self, trainer, step, loss):
        if trainer.is_main and step % trainer.args.logging_steps == 0:
            print(f"step {step} loss {loss:.4f} elapsed {trainer.elapsed():.1f}s", flush=True)


class HeartbeatCallback(Callback):
    def __init__(self, out_dir, rank, every_s):
        self.path = os.path.join(out_dir, "heartbeat", f"rank{rank}.json")
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.every_s, self.last = every_s, 0.0

    def on_step_end(self, trainer, step, loss):
        now = time.time()
        if now - self.last >= self.every_s:  # rank-local and collective-free
            with open(self.path + ".tmp", "w") as f:
                json.dump({"step": step, "time": now, "loss": loss}, f)
            os.replace(self.path + ".tmp", self.path)
            self.last = now


class Trainer:
    def __init__(self, args, model, callbacks):
        self.args = args
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        self.model = DDP(model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=args.learning_rate)
        self.callbacks = callbacks
        self.writer = AsyncCheckpointWriter(args.output_dir) if self.is_main else None
        self.t0 = None
        self.start_step = self._maybe_resume()

    def elapsed(self):
        return time.monotonic() - self.t0

    def _maybe_resume(self):
        # the main process picks the newest *complete* checkpoint; everyone uses its choice
        choice = [None]
        if self.is_main and os.path.isdir(self.args.output_dir):
            done = [d for d in os.listdir(self.args.output_dir) if d.startswith("checkpoint-")
                    and os.path.exists(os.path.join(self.args.output_dir, d, "COMPLETE"))]
            if done:
                choice[0] = max(done, key=lambda d: int(d.split("-")[1]))
        dist.broadcast_object_list(choice, src=0)
        if choice[0] is None:
            return 0
        state = torch.load(os.path.join(self.args.output_dir, choice[0], "state.pt"),
                           map_location="cpu", weights_only=True)
        self.model.module.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optim"])
        return state["step"]

    def batch(self, step):
        g = torch.Generator().manual_seed(step * 16 + self.rank)
        x = torch.randn(self.args.per_device_batch_size, 48, generator=g)
        y = (x[:, :8].sum(1) > 0).long()
        return x, y

    def should_stop(self, step):
        # agree on the stop decision: any rank over budget stops everyone at the same step
        flag = torch.tensor([1.0 if self.elapsed() > self.args.max_train_seconds else 0.0])
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item()) or step >= self.args.max_steps

    def train(self):
        self.t0 = time.monotonic()
        step = self.start_step
        self.model.train()
        while True:
            step += 1
            x, y = self.batch(step)
            loss = F.cross_entropy(self.model(x), y)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            for cb in self.callbacks:
                cb.on_step_end(self, step, loss.item())
            if self.is_main and step % self.args.save_steps == 0:
                self.writer.submit(step, self.model.module, self.opt)
            if step % self.args.stop_check_steps == 0 and self.should_stop(step):
                break
        if self.is_main:
            self.writer.submit(step, self.model.module, self.opt)
            self.writer.close()
            print(f"stopped at step {step} after {self.elapsed():.1f}s", flush=True)
        dist.barrier()
        for cb in self.callbacks:
            cb.on_train_end(self)
        return step


def main():
    args = parse_dataclass_args(TrainingArguments)
    dist.init_process_group("gloo", timeout=timedelta(seconds=args.pg_timeout))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    os.makedirs(args.output_dir, exist_ok=True)
    model = nn.Sequential(nn.Linear(48, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                          nn.Linear(128, 2))
    cbs = [LoggingCallback(),
           HeartbeatCallback(args.output_dir, dist.get_rank(), args.heartbeat_seconds)]
    try:
        Trainer(args, model, cbs).train()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
