"""Rank 1 starts late (a slow import, a busy machine), then skips a collective that rank 0 makes.

    torchrun --nproc-per-node 2 late_start.py LATE_S TIMEOUT_S

With the workbook's start-up (workers.common.join: a long start-up timeout, a barrier, then TIMEOUT_S), rank 0
passes the first all_reduce and times out in the second after TIMEOUT_S, however late rank 1 started.
"""
import os
import sys
import time

from nbhelpers.workers.common import join, log

late, timeout = float(sys.argv[1]), float(sys.argv[2])
rank = int(os.environ["RANK"])
if rank == 1:
    time.sleep(late)
dist, dev = join("gloo", timeout)
import torch  # noqa: E402

t = torch.ones(2)
dist.all_reduce(t)
log("first all_reduce passed")
if rank == 0:
    t0 = time.monotonic()
    try:
        dist.all_reduce(t)
    finally:
        log(f"second all_reduce ended after {time.monotonic() - t0:.1f} s")
else:
    time.sleep(3 * timeout + 5)  # skips the second all_reduce
