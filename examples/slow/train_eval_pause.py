"""A healthy DDP job with the most common pause in training: every few steps rank 0 works alone for seconds
while the other ranks wait at a barrier.  It ends `ok`; nothing in it hangs.

    torchrun --nproc-per-node 2 train_eval_pause.py [--steps 12] [--every 4] [--eval-s 5] [--pause eval]

--pause eval    rank 0 scores a held-out set (CPU work)
--pause save    rank 0 writes a checkpoint, flushed to disk, again and again (file I/O)
--pause slowfs  rank 0 writes the checkpoint to a file system that takes it at its own pace, as a network mount
                does (a FIFO whose reader takes 8 MiB/s stands in for it): rank 0 sleeps in write() nearly all
                the time, bytes moving
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def evaluate(model, seconds):
    """Score a held-out set: CPU work for about ``seconds`` (timed by the work done, not by sleeping)."""
    x = torch.randn(256, 256)
    t0, batches = time.monotonic(), 0
    with torch.no_grad():
        while time.monotonic() - t0 < seconds:
            x = torch.tanh(x @ x.T / 256)
            batches += 1
    return batches


def save(model, seconds):
    """Write the model and a 4 MiB optimizer-like state to disk for about ``seconds``, flushed each time."""
    state = {"model": model.state_dict(), "moments": torch.randn(1 << 20)}
    path, t0, n = os.path.join(tempfile.gettempdir(), f"ckpt-{os.getpid()}.pt"), time.monotonic(), 0
    while time.monotonic() - t0 < seconds:
        with open(path, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        n += 1
    os.unlink(path)
    return n


READER = """
import sys, time
with open(sys.argv[1], "rb", buffering=0) as f:
    while f.read(1 << 16):   # 8 MiB/s: 64 KiB every 8 ms
        time.sleep(0.008)
"""


def slow_write(seconds):
    """Write checkpoint bytes for about ``seconds`` to a file whose other end takes them at 8 MiB/s."""
    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "ckpt.pt")
    os.mkfifo(path)
    reader = subprocess.Popen([sys.executable, "-c", READER, path])
    chunk, t0, sent = bytes(1 << 20), time.monotonic(), 0
    with open(path, "wb", buffering=0) as f:
        while time.monotonic() - t0 < seconds:
            f.write(chunk)
            sent += len(chunk)
    reader.wait(timeout=30)
    os.unlink(path)
    os.rmdir(folder)
    return sent >> 20


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--eval-s", type=float, default=5.0, help="seconds of each pause")
    p.add_argument("--pause", choices=["eval", "save", "slowfs"], default="eval")
    args = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = DDP(nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(1, args.steps + 1):
        loss = model(torch.randn(16, 32)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % args.every == 0:
            if rank == 0 and args.pause == "eval":
                print(f"step {step}: evaluated {evaluate(model, args.eval_s)} batches", flush=True)
            elif rank == 0 and args.pause == "save":
                print(f"step {step}: wrote the checkpoint {save(model, args.eval_s)} times", flush=True)
            elif rank == 0:
                print(f"step {step}: wrote {slow_write(args.eval_s)} MiB to the slow file system", flush=True)
            dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank}: done", flush=True)


if __name__ == "__main__":
    main()
