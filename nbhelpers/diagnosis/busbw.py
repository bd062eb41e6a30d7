"""nccl-tests' bandwidth arithmetic: sizes, algorithm bandwidth and bus bandwidth per collective.

``algbw = size / time``; ``busbw = algbw * factor(op, n)`` where the factor makes the number
comparable with the link's peak whatever the world size (nccl-tests, doc/PERFORMANCE.md):

=============== ================ ==================================================
collective      factor           ``size`` is
=============== ================ ==================================================
all_reduce      2 (n - 1) / n    the buffer each rank reduces (in place)
all_gather      (n - 1) / n      the gathered output (n x each rank's input)
reduce_scatter  (n - 1) / n      the input (n x each rank's output)
broadcast       1                the buffer
=============== ================ ==================================================

Pure arithmetic, no torch import: the kernel, the ranks and the watchdog verdict share it.
"""
from __future__ import annotations

import re

OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
DTYPE_BYTES = {"float32": 4, "float": 4, "fp32": 4, "float16": 2, "half": 2, "fp16": 2, "bfloat16": 2, "bf16": 2,
               "float64": 8, "double": 8, "int64": 8, "long": 8, "int32": 4, "int": 4, "int8": 1, "uint8": 1,
               "bool": 1, "float8_e4m3fn": 1, "float8_e5m2": 1}
_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
          "g": 2**30, "gb": 2**30, "gib": 2**30}


def bus_factor(op: str, world: int) -> float:
    """busbw / algbw for ``op`` on ``world`` ranks (nccl-tests' formulas)."""
    op = normalize_op(op)
    if world < 1:
        raise ValueError(f"world size must be >= 1, got {world}")
    return {"all_reduce": 2 * (world - 1) / world, "all_gather": (world - 1) / world,
            "reduce_scatter": (world - 1) / world, "broadcast": 1.0, "all_to_all": (world - 1) / world,
            "reduce": 1.0, "send_recv": 1.0}[op]


def normalize_op(op: str) -> str:
    """``ALLREDUCE``, ``allreduce``, ``_ALLGATHER_BASE``, ``REDUCE_SCATTER`` ... -> one of :data:`OPS`."""
    key = re.sub(r"[^a-z]", "", op.lower()).replace("base", "").replace("coalesced", "").replace("into", "")
    table = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
             "broadcast": "broadcast", "alltoall": "all_to_all", "reduce": "reduce", "send": "send_recv",
             "recv": "send_recv", "sendrecv": "send_recv"}
    if key not in table:
        raise ValueError(f"unknown collective {op!r}: expected one of {', '.join(OPS)}")
    return table[key]


def parse_size(text: str | int | float) -> int:
    """``"4K"`` / ``"256MiB"`` / ``"1.5 GB"`` / ``4096`` -> bytes (binary units)."""
    if isinstance(text, (int, float)):
        return int(text)
    m = re.fullmatch(r"\s*([\d.]+)\s*([a-zA-Z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a size: {text!r} (write e.g. 4K, 16M, 1G or a number of bytes)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def size_range(lo="4K", hi="256M", factor: int = 4) -> list[int]:
    """nccl-tests' ``-b lo -e hi -f factor``: lo, lo*factor, ... up to hi."""
    lo_b, hi_b = parse_size(lo), parse_size(hi)
    if lo_b <= 0 or hi_b < lo_b or factor < 2:
        raise ValueError(f"need 0 < lo <= hi and factor >= 2, got {lo}, {hi}, {factor}")
    out, s = [], lo_b
    while s <= hi_b:
        out.append(s)
        s *= factor
    return out


def human(nbytes: float) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            v = nbytes / scale
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.2f} {unit}"
    return f"{int(nbytes)} B"


def op_size_bytes(op: str, numel_in: int | None, numel_out: int | None, elem_bytes: int) -> int:
    """The ``size`` nccl-tests would use for one call with these element counts (see the table above)."""
    op = normalize_op(op)
    numel = numel_out if op == "all_gather" and numel_out else numel_in if numel_in else numel_out
    if numel is None:
        raise ValueError("no element count")
    return int(numel) * elem_bytes


def expected_seconds(op: str, size_bytes: float, world: int, busbw_gbs: float) -> float:
    """How long one ``op`` of ``size_bytes`` takes at bus bandwidth ``busbw_gbs`` (GB/s, 1e9)."""
    return size_bytes * bus_factor(op, world) / (busbw_gbs * 1e9)
