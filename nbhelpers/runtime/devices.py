"""What this machine offers the ranks: GPUs, and so the backend (nccl with GPUs, else gloo)."""
from __future__ import annotations

__all__ = ["gpu_count", "default_backend"]


def gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def default_backend() -> str:
    """``nccl`` where GPUs exist, else ``gloo`` (what every worker picks with ``--backend auto``)."""
    return "nccl" if gpu_count() else "gloo"
