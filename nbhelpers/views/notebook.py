"""A notebook's first cell: charts that survive HTML export, and what this machine will show."""
from __future__ import annotations

import sys

from nbhelpers.runtime.devices import gpu_count

__all__ = ["setup_notebook"]


def setup_notebook(quiet: bool = False) -> dict:
    """Plotly output that survives HTML export, and a warning (not a failure) without a GPU."""
    import plotly.io as pio
    import torch

    pio.renderers.default = "plotly_mimetype+notebook"
    info = {"torch": torch.__version__, "gpus": gpu_count()}
    info["backend"] = "nccl" if info["gpus"] else "gloo"
    if not quiet:
        if info["gpus"]:
            print(f"torch {info['torch']}: {info['gpus']} GPU(s); ranks will use NCCL.")
        else:
            print(f"torch {info['torch']}: no GPU here. Every run uses the gloo backend on the CPU: real processes, "
                  "sockets and timeouts, but NCCL-specific behaviour (NCCL_DEBUG logs, transports) is not shown.",
                  file=sys.stderr)
    return info
