"""Process-group bootstrap and a small context object describing this process."""
from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

log = logging.getLogger("projkit.dist")


@dataclass(frozen=True)
class DistContext:
    index: int
    size: int
    local_index: int

    @classmethod
    def from_env(cls) -> "DistContext":
        return cls(
            index=int(os.environ.get("RANK", 0)),
            size=int(os.environ.get("WORLD_SIZE", 1)),
            local_index=int(os.environ.get("LOCAL_RANK", 0)),
        )

    @property
    def leader(self) -> bool:
        return self.index == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1

    def barrier(self):
        if dist.is_initialized():
            dist.barrier()

    def all_mean(self, value: float) -> float:
        t = torch.tensor([float(value)])
        if dist.is_initialized():
            dist.all_reduce(t)
            t /= self.size
        return t.item()

    def __str__(self):
        return f"[{self.index}/{self.size}]"


def _configure_network(cfg) -> None:
    # Clusters with several NICs need to pin gloo to the fabric interface.
    if getattr(cfg, "ifname", ""):
        os.environ["GLOO_SOCKET_IFNAME"] = cfg.ifname
        log.info("pinning gloo to interface %s", cfg.ifname)


@contextlib.contextmanager
def distributed(cfg):
    """Initialise the default process group for the duration of the block."""
    ctx = DistContext.from_env()
    _configure_network(cfg)
    torch.set_num_threads(1)
    dist.init_process_group(cfg.backend, timeout=timedelta(seconds=cfg.timeout_s))
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s {ctx} %(name)s: %(message)s")
    try:
        yield ctx
        dist.barrier()  # nobody tears down while a peer is still talking to it
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@contextlib.contextmanager
def leader_first(ctx: DistContext):
    """Let the leader run the block first (e.g. to build a cache), then the others."""
    if not ctx.leader:
        ctx.barrier()
    yield
    if ctx.leader:
        ctx.barrier()
