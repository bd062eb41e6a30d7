"""What every rank program needs: its identity, a prefixed log, the backend, init whose short timeout starts once
every rank is ready."""
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


START_TIMEOUT_S = 300.0
"""How long start-up may take (the rendezvous, ``init_process_group``, the first barrier) unless a rank program
is told otherwise (``--start-timeout``, or ``$NBH_START_TIMEOUT``): a slow or busy machine takes seconds to
import torch and connect, and a demonstration's short timeout must not strike there."""


def start_timeout(timeout_s: float, start_timeout_s: float | None = None) -> float:
    """The timeout that bounds start-up: the one given, else ``$NBH_START_TIMEOUT``, else
    :data:`START_TIMEOUT_S`; never shorter than ``timeout_s``."""
    if start_timeout_s is None:
        start_timeout_s = float(os.environ.get("NBH_START_TIMEOUT") or START_TIMEOUT_S)
    return max(timeout_s, start_timeout_s)


def init(backend: str, timeout_s: float, start_timeout_s: float | None = None):
    """``init_process_group`` from torchrun's env; ``timeout_s`` bounds every collective after start-up.

    A process group's timeout also bounds its own start (the store's waits in ``init_process_group``, the
    first collective's connections), so a short one turns a slow start into ``DistStoreError: wait timeout``.
    So the group starts with :func:`start_timeout`, every rank meets at a barrier, and only then does the
    group's timeout become ``timeout_s`` (``_set_pg_timeout``): the short timeout starts counting once every
    rank is ready, whatever the machine's speed."""
    import torch.distributed as dist

    start = start_timeout(timeout_s, start_timeout_s)
    dist.init_process_group(backend=backend, timeout=timedelta(seconds=start))
    if start > timeout_s:
        ready(dist, backend)
        shorten(dist, timeout_s)
    return dist


def ready(dist, backend: str, group=None) -> None:
    """A barrier every rank passes once it has started: after it, a short timeout measures the fault, not the
    start-up.  NCCL's barrier is given this rank's GPU (else it guesses one)."""
    if backend == "nccl":
        dist.barrier(group=group, device_ids=[int(os.environ.get("LOCAL_RANK", "0"))])
    else:
        dist.barrier(group=group)


def shorten(dist, timeout_s: float, group=None) -> None:
    """Set a process group's timeout after it started (torch's ``_set_pg_timeout``: gloo and NCCL).

    Under ``TORCH_DISTRIBUTED_DEBUG=DETAIL`` the group is a wrapper that first checks every collective with a
    helper group of its own, which keeps the timeout the group started with (torch 2.13): there a rank that
    never arrives is timed out after the start-up timeout; what DETAIL is for, a mismatch, is caught at once."""
    from torch.distributed.distributed_c10d import _get_default_group, _set_pg_timeout

    try:
        from torch._C._distributed_c10d import _ProcessGroupWrapper
    except ImportError:  # a build without the DETAIL wrapper
        _ProcessGroupWrapper = ()
    pg = group or _get_default_group()
    wrapped = [b for d in pg._device_types if isinstance(b := pg._get_backend(d), _ProcessGroupWrapper)]
    for b in wrapped:
        b.wrapped_pg._set_default_timeout(timedelta(seconds=timeout_s))
    if wrapped:
        log(f"TORCH_DISTRIBUTED_DEBUG=DETAIL: its checks keep the start-up timeout; {timeout_s:g} s applies after them")
    else:
        _set_pg_timeout(timedelta(seconds=timeout_s), group)


def join(requested: str, timeout_s: float, start_timeout_s: float | None = None):
    """Pick the backend, :func:`init` inside a ``rendezvous`` stage event, take this rank's device.

    Returns ``(dist, dev)``; every collective worker starts with it."""
    from nbhelpers.runtime.events import stage

    backend = pick_backend(requested)
    with stage("rendezvous", backend=backend, timeout=timeout_s,
               start_timeout=start_timeout(timeout_s, start_timeout_s)):
        dist = init(backend, timeout_s, start_timeout_s)
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
