"""The real causes of collective timeouts, reproduced on a tiny training loop; every call is traced.

Each rank runs ``--steps`` steps of: all_reduce "grads" [1024] -> all_reduce "loss" [1]
(and, with ``--eval-every``, an evaluation whose metrics [4] are all_reduced), then a final barrier.
At step ``--fault-step`` rank ``--fault-rank`` misbehaves, per ``--scenario``:

==============  ============================================================================
straggler       sleeps ``--stall`` s before "grads" (data loading, a slow disk, a rank-0 save)
skip            skips its "loss" all_reduce (``if not torch.isnan(loss): all_reduce(loss)``)
shape           sends "grads" with 1000 elements instead of 1024 (a rank with another config)
rank0-only      rank 0 alone calls a broadcast "ema state_dict" (an EMA load in rank-0-only code)
crash           starts "grads", then dies by SIGKILL in the middle of it (the OOM killer)
eval-naive      its evaluation raises; "skip the failed evaluation" skips the metrics all_reduce
eval-agreed     its evaluation raises; all ranks all_reduce an error flag first and skip together
==============  ============================================================================

Every collective is an event ``#<seq> <call>`` with ``seq``, ``call``, ``op``, ``shape``, ``dtype``:
the per-rank collective sequence the culprit logic compares (``nbhelpers.diagnosis.culprit``, rule 0).  When
a collective fails and ``TORCH_FR_BUFFER_SIZE`` is set, the rank dumps torch's Flight Recorder (the
last entries) as an event.  With ``--monitored S`` a ``monitored_barrier`` (timeout S) opens every
step, and names the rank that does not arrive.

Run by hand (3 ranks; the straggler is rank 1)::

    torchrun --nproc-per-node 3 -m nbhelpers.workers.desync --scenario straggler --timeout 3
    TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun --nproc-per-node 3 -m nbhelpers.workers.desync --scenario shape
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import time
from datetime import timedelta

from nbhelpers.runtime.events import emit, stage
from nbhelpers.workers.common import join, leave, log

SCENARIOS = ["none", "straggler", "skip", "shape", "rank0-only", "crash", "eval-naive", "eval-agreed"]


class EvalFailed(RuntimeError):
    """This rank's evaluation raised (a bad batch, an OOM in generation, a missing file)."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.desync", description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="none", choices=SCENARIOS)
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=1)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--timeout", type=float, default=5.0, help="process-group timeout, seconds")
    p.add_argument("--stall", type=float, default=30.0)
    p.add_argument("--monitored", type=float, default=0.0, help="monitored_barrier timeout per step (0: none)")
    p.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"])
    return p.parse_args(argv)


class Tracer:
    """Numbers this rank's collectives and wraps each in an event; dumps the Flight Recorder on failure."""

    def __init__(self, dist, dev):
        self.dist, self.dev, self.seq = dist, dev, 0

    def __call__(self, call: str, op: str, tensor=None, **kw):
        self.seq += 1
        shape = list(tensor.shape) if tensor is not None else []
        dtype = str(tensor.dtype).replace("torch.", "") if tensor is not None else None
        try:
            with stage(f"#{self.seq} {call}", seq=self.seq, call=call, op=op, shape=shape, dtype=dtype):
                fn = getattr(self.dist, op)
                return fn(tensor, **kw) if tensor is not None else fn(**kw)
        except Exception:
            flight_recorder_event()
            raise


def flight_recorder_event(last: int = 8) -> None:
    """Emit the Flight Recorder's last entries for this rank (torch records gloo too when the buffer is set)."""
    if not int(os.environ.get("TORCH_FR_BUFFER_SIZE", os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE", "0")) or 0):
        return
    try:
        import torch

        dump = json.loads(torch._C._distributed_c10d._dump_fr_trace_json())
    except Exception as exc:  # not built with it, or this backend does not record
        emit("flight_recorder", "info", entries=[], error=str(exc)[:200])
        return
    entries = [{"seq": e.get("collective_seq_id"), "op": e.get("profiling_name"), "state": e.get("state"),
                "sizes": e.get("input_sizes"), "pg": (e.get("process_group") or [None, None])[1]}
               for e in dump.get("entries", [])[-last:]]
    emit("flight_recorder", "info", entries=entries)


def evaluate(rank: int, fail: bool, dev):
    import torch

    if fail:
        raise EvalFailed(f"rank {rank}: evaluation raised (a corrupt batch in this rank's shard)")
    return torch.tensor([1.0, 2.0, 3.0, 4.0], device=dev)


def main(argv=None) -> None:
    args = parse_args(argv)
    import torch

    dist, dev = join(args.backend, args.timeout)
    rank, world = dist.get_rank(), dist.get_world_size()
    coll = Tracer(dist, dev)
    sc, me = args.scenario, rank == args.fault_rank
    log(f"scenario {sc}, fault rank {args.fault_rank} at step {args.fault_step}, world {world}, "
        f"TORCH_DISTRIBUTED_DEBUG={os.environ.get('TORCH_DISTRIBUTED_DEBUG', '(unset)')}")
    for step in range(args.steps):
        strike = step == args.fault_step
        if args.monitored:
            with stage(f"step {step} monitored_barrier", step=step):
                if sc == "straggler" and me and strike:
                    log(f"fault: stalling {args.stall:g} s before the step")
                    time.sleep(args.stall)
                dist.monitored_barrier(timeout=timedelta(seconds=args.monitored), wait_all_ranks=True)
        elif sc == "straggler" and me and strike:
            log(f"fault: stalling {args.stall:g} s before grads")
            with stage("stalled", step=step):
                time.sleep(args.stall)
        grads = torch.ones(1000 if (sc == "shape" and me and strike) else 1024, device=dev)
        if sc == "crash" and me and strike:
            coll.seq += 1
            emit(f"#{coll.seq} grads", "running", seq=coll.seq, call="grads", op="all_reduce",
                 shape=list(grads.shape), dtype="float32")
            big = torch.ones(16 << 20, device=dev)
            dist.all_reduce(big, async_op=True)
            log("fault: SIGKILL in the middle of the all_reduce")
            os.kill(os.getpid(), signal.SIGKILL)
        coll("grads", "all_reduce", grads)
        if not (sc == "skip" and me and strike):
            coll("loss", "all_reduce", torch.ones(1, device=dev))
        else:
            log("fault: skipping the loss all_reduce")
        if sc == "rank0-only" and rank == 0 and strike:
            coll("ema state_dict", "broadcast", torch.zeros(16, device=dev), src=0)
        if sc.startswith("eval") and strike:
            run_eval(coll, dist, rank, me, sc, dev)
    coll("final barrier", "barrier")
    leave(dist, "all steps")


def run_eval(coll, dist, rank: int, me: bool, sc: str, dev) -> None:
    import torch

    if sc == "eval-naive":  # 'skip the failed evaluation': catch, log, return defaults, carry on training
        try:
            with stage("eval", rank_fails=me):
                metrics = evaluate(rank, me, dev)
                coll("eval metrics", "all_reduce", metrics)
        except EvalFailed as exc:
            log(f"evaluation failed, skipping it: {exc}")
        return
    failed = False
    with stage("eval", rank_fails=me) as out:
        try:
            metrics = evaluate(rank, me, dev)
        except EvalFailed as exc:
            failed, metrics = True, None
            log(f"evaluation failed here: {exc}")
        flag = torch.tensor([1.0 if failed else 0.0], device=dev)
        coll("eval error flag", "all_reduce", flag)  # every rank makes this call, failed or not
        out["ranks_failed"] = int(flag.item())
        if flag.item() == 0:
            coll("eval metrics", "all_reduce", metrics)
        else:
            log(f"{int(flag.item())} rank(s) failed evaluation: every rank skips the metrics together")


if __name__ == "__main__":
    main()
