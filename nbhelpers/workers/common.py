"""What every rank program needs: its identity, a prefixed log, the backend, init with a timeout."""
from __future__ import annotations

import os
import socket
import sys
from datetime import timedelta

from nbhelpers.runtime.events import rank_identity


def log(msg: str) -> None:
    """Print with the ``[host:rank]`` prefix and flush (a rank may be killed at any moment)."""
    rank, host = rank_identity()
    print(f"[{host}:{rank}] {msg}", flush=True)


class CheckFailed(RuntimeError):
    """A collective returned wrong numbers."""


def pick_backend(requested: str = "auto") -> str:
    """``nccl`` when every local rank can have its own GPU, else ``gloo``."""
    if requested != "auto":
        return requested
    import torch

    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    if torch.cuda.is_available() and torch.cuda.device_count() >= local_world:
        return "nccl"
    return "gloo"


def device_for(backend: str):
    import torch

    if backend == "nccl":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        return dev
    return torch.device("cpu")


def init(backend: str, timeout_s: float):
    """``init_process_group`` from torchrun's env with a timeout that also bounds collectives."""
    import torch.distributed as dist

    dist.init_process_group(backend=backend, timeout=timedelta(seconds=timeout_s))
    return dist


def join(requested: str, timeout_s: float):
    """Pick the backend, ``init_process_group`` inside a ``rendezvous`` stage event, take this rank's device.

    Returns ``(dist, dev)``; every collective worker starts with it."""
    from nbhelpers.runtime.events import stage

    backend = pick_backend(requested)
    with stage("rendezvous", backend=backend, timeout=timeout_s):
        dist = init(backend, timeout_s)
        dev = device_for(backend)
    return dist, dev


def leave(dist, what: str) -> None:
    """The end every collective worker shares: ``destroy`` as a stage event, then ``done``, then '<what> passed'."""
    from nbhelpers.runtime.events import emit, stage

    with stage("destroy"):
        dist.destroy_process_group()
    emit("done", "ok")
    log(f"{what} passed")


def sync(dev) -> None:
    """Wait for the device's queued work (a no-op on the CPU), so that timings cover the collective itself."""
    if dev.type == "cuda":
        import torch

        torch.cuda.synchronize(dev)


def closed_port() -> int:
    """A port that nothing listens on right now (bind, read the number, close)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exit_now(code: int, why: str) -> None:
    log(f"exiting with code {code}: {why}")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
