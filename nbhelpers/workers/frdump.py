"""A tiny training loop that leaves torch's Flight Recorder dumps behind, one file per rank, with a fault.

Each step: forward/backward on ``nn.Linear(1024, 1024, bias=False)``, all_reduce of the flattened
gradients ([1048576] float32, one bucket), SGD step, all_reduce of the loss ([1]).  At step
``--fault-step`` rank ``--fault-rank`` (default: the last) misbehaves, per ``--fault``:

========  ==================================================================================
none      nothing; every rank dumps at the end (so there is something to compare with)
skip      skips its gradient all_reduce and then waits (``--hang`` s, like a rank stuck in
          its data loader); the others enter the all_reduce and time out
mismatch  all_reduces a bucket twice the size ([2097152], a rank built with another config);
          with gloo both ranks then wait on each other and time out
========  ==================================================================================

How the dumps get written -- what a user's gloo job has to do itself (torch 2.13 writes no file for
gloo: ``TORCH_FR_DUMP_TEMP_FILE`` is only used by ProcessGroupNCCL's watchdog):

* ``TORCH_FR_BUFFER_SIZE`` > 0 before the process group is created turns recording on (set here to 2000
  unless the caller set it);
* on an exception (the gloo timeout), on SIGTERM (torchrun sends it to the survivors once a rank failed)
  and at the end, the rank writes ``torch._C._distributed_c10d._dump_fr_trace()`` (a pickle; ``--format
  json``: ``_dump_fr_trace_json()``) to ``<prefix><rank>``, the name NCCL's watchdog would use.  The
  prefix is ``--out DIR`` + ``/fr_trace_rank_``, else ``$TORCH_FR_DUMP_TEMP_FILE``.

A size mismatch small enough to fit one gloo segment (e.g. [1024] vs [2048]) does not hang: the rank
that receives more bytes than it posted aborts inside gloo (``op.preamble.length <= op.nbytes``,
SIGABRT), and that rank leaves no dump.  The 4 MiB vs 8 MiB buckets here make both ranks time out.

Run by hand::

    torchrun --standalone --nproc-per-node 2 -m nbhelpers.workers.frdump --fault skip --out /tmp/fr --timeout 3
    python -m nbhelpers doctor --fr /tmp/fr
"""
from __future__ import annotations

import argparse
import os
import signal
import time
from datetime import timedelta

from nbhelpers.runtime.events import emit
from nbhelpers.workers.common import exit_now, join, log

FAULTS = ["none", "skip", "mismatch"]
HIDDEN = 1024  # Linear(1024, 1024) without bias: 1048576 gradient elements, one 4 MiB bucket


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.frdump", description=__doc__.split("\n")[0])
    p.add_argument("--fault", default="none", choices=FAULTS)
    p.add_argument("--fault-rank", type=int, default=-1, help="the misbehaving rank (default -1: the last)")
    p.add_argument("--fault-step", type=int, default=2)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--timeout", type=float, default=5.0, help="collective timeout, seconds")
    p.add_argument("--hang", type=float, default=60.0, help="how long a skipping rank waits, seconds")
    p.add_argument("--out", default="", help="folder for the dumps (default: $TORCH_FR_DUMP_TEMP_FILE prefix)")
    p.add_argument("--format", default="pickle", choices=["pickle", "json"])
    return p.parse_args(argv)


def dump_prefix(out: str) -> str:
    if out:
        os.makedirs(out, exist_ok=True)
        return os.path.join(out, "fr_trace_rank_")
    return os.environ.get("TORCH_FR_DUMP_TEMP_FILE", "/tmp/nccl_trace_rank_")


def write_dump(prefix: str, rank: int, fmt: str, why: str) -> str:
    """This rank's Flight Recorder buffer to ``<prefix><rank>``, written whole or not at all."""
    import torch

    c10d = torch._C._distributed_c10d
    data = c10d._dump_fr_trace_json() if fmt == "json" else c10d._dump_fr_trace()
    path = f"{prefix}{rank}"
    with open(path + ".tmp", "wb") as fh:
        fh.write(data)
    os.replace(path + ".tmp", path)
    emit("fr_dump", "ok", path=path, why=why, bytes=len(data))
    return path


def main(argv=None) -> None:
    args = parse_args(argv)
    os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")  # read when the process group is created
    import torch

    dist, _ = join("gloo", max(args.timeout, 30.0))  # a generous rendezvous on a loaded machine ...
    dist.distributed_c10d._set_pg_timeout(timedelta(seconds=args.timeout))  # ... a short collective timeout
    rank, world = dist.get_rank(), dist.get_world_size()
    culprit = args.fault_rank % world
    me = rank == culprit and args.fault != "none"
    prefix = dump_prefix(args.out)
    signal.signal(signal.SIGTERM, lambda *_: (write_dump(prefix, rank, args.format, "SIGTERM"), os._exit(143)))
    log(f"fault {args.fault}, rank {culprit} at step {args.fault_step}, world {world}, dumps {prefix}<rank>")

    torch.manual_seed(0)
    model = torch.nn.Linear(HIDDEN, HIDDEN, bias=False)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(rank)
    try:
        for step in range(args.steps):
            opt.zero_grad()
            loss = model(torch.randn(8, HIDDEN, generator=gen)).pow(2).mean()
            loss.backward()
            grads = model.weight.grad.flatten().clone()
            if me and step == args.fault_step and args.fault == "skip":
                log(f"fault: step {step} skips the gradient all_reduce, then waits {args.hang:g} s")
                # short sleeps: a SIGTERM the kernel hands to another thread (the main one being briefly stopped by
                # a stack reader, say) only flags Python's handler, which runs when the main thread next wakes
                for _ in range(int(args.hang * 10)):
                    time.sleep(0.1)
                raise RuntimeError(f"rank {rank} waited {args.hang:g} s after skipping an all_reduce")
            if me and step == args.fault_step and args.fault == "mismatch":
                log(f"fault: step {step} all_reduces {2 * grads.numel()} elements instead of {grads.numel()}")
                grads = torch.cat([grads, grads])
            dist.all_reduce(grads)
            grads /= world
            model.weight.grad.copy_(grads[: HIDDEN * HIDDEN].view_as(model.weight))
            opt.step()
            dist.all_reduce(loss.detach())
            log(f"step {step} done")
    except Exception as exc:
        log(f"failed: {str(exc).splitlines()[0][:200]}")
        write_dump(prefix, rank, args.format, "exception")
        raise
    write_dump(prefix, rank, args.format, "end")
    dist.destroy_process_group()
    log("all steps passed")
    # With the Flight Recorder on, gloo, torch 2.13: about one healthy run in twelve still aborted at interpreter exit
    # after destroy_process_group ("terminate called without an active exception", exit -6; 2 of 24 runs, 0 of 24
    # with TORCH_FR_BUFFER_SIZE=0, 2 of 24 without writing the dump): torch's teardown, not this job's.  The dumps
    # are written and the group is gone, so end here rather than in the interpreter's teardown.
    exit_now(0, "dumps written, process group destroyed")


if __name__ == "__main__":
    main()
