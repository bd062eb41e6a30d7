"""A bare torch timing loop (the baseline for bench_sweep): sizes in bytes as argv; JSON lines per rank in $BARE_OUT."""
import json
import os
import sys
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
iters = int(os.environ.get("BARE_ITERS", "5"))
results = []
for size in map(int, sys.argv[1:]):
    t = torch.zeros(size // 4)
    for _ in range(2):
        dist.all_reduce(t)
    dist.barrier()
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        dist.all_reduce(t)
        times.append(time.perf_counter() - t0)
    results.append({"rank": dist.get_rank(), "bytes": size, "time": sum(times) / len(times)})
dist.destroy_process_group()
with open(os.path.join(os.environ["BARE_OUT"], f"rank{results[0]['rank']}.json"), "w") as fh:
    json.dump(results, fh)
