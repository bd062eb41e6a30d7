"""The collective record's cost: a healthy DDP job's training rate under plain torchrun, under the rank shim without
the record (``--no-record``), and under the shim as ``run`` starts it (the record thread looking at its request file
five times a second, the record written at the end).  The same script, the same machine, interleaved runs.

The job is ``examples/slow/train_straggler.py --cause none``: 2 ranks, a DDP all_reduce every step, and the script
prints its own rate of the training loop (start-up excluded).  Also timed: writing one rank's record at the end.

    python bench/bench_record.py            # or: python bench/run.py bench_record
"""
from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

TITLE = "Collective record: training rate with and without it (2 ranks, DDP, gloo; ratio vs plain torchrun, same run)"
STEPS = 400


def _rate(mode: str) -> tuple[float, float | None]:
    """steps/s rank 0 printed last, and (with the record) how long the shim's end took to write it."""
    from nbhelpers.runtime.launchspec import SHIM
    from nbhelpers.scenarios.supervise import example

    work = Path(tempfile.mkdtemp(prefix="bench-record-"))
    try:
        script = example("train_straggler", work)
        shim = [] if mode == "plain" else [SHIM, "--log-dir", str(work / "logs"), *(["--no-record"] if mode ==
                                                                                  "shim, no record" else []), "--"]
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "127.0.0.1:0", *shim,
               str(script), "--cause", "none", "--steps", str(STEPS)]
        out = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=600)
        text = out.stdout + out.stderr + "".join(p.read_text() for p in (work / "logs").glob("rank0.log"))
        rates = re.findall(r"\[rank 0\] step \d+ loss \S+ ([\d.]+) steps/s", text)
        assert rates, text[-2000:]
        record = work / "logs" / "fr" / "rank0.pkl"
        assert (mode == "shim + record") == record.exists(), (mode, text[-1000:])
        return float(rates[-1]), None
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _write_time(reps: int) -> float:
    """Median seconds to write a full record (2000 entries) from a process that issued 3000 collectives."""
    code = ("import sys, time, tempfile, torch, torch.distributed as dist\n"
            "sys.path.insert(0, sys.argv[1]); import rankshim\n"
            "dist.init_process_group('gloo', init_method='file://' + tempfile.mktemp(), rank=0, world_size=1)\n"
            "for _ in range(3000): dist.all_reduce(torch.ones(4))\n"
            "ts = []\n"
            f"for _ in range({reps}):\n"
            "    t = time.perf_counter(); rankshim._fr_write(tempfile.mktemp()); ts.append(time.perf_counter() - t)\n"
            "print(sorted(ts)[len(ts) // 2])\n")
    from nbhelpers.runtime.launchspec import SHIM

    out = subprocess.run([sys.executable, "-c", code, str(Path(SHIM).parent)], capture_output=True, text=True,
                         timeout=300)
    return float(out.stdout.strip().splitlines()[-1])


def rows(reps: int) -> list[dict]:
    modes = ["plain", "shim, no record", "shim + record"]
    rates: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(reps):  # interleaved: drift in the machine's load hits every mode alike
        for m in modes:
            rates[m].append(_rate(m)[0])
    base = statistics.median(rates["plain"])
    out = [{"how the ranks ran": m, "steps/s (median)": f"{statistics.median(rates[m]):.1f}",
            "ratio vs plain torchrun": f"{statistics.median(rates[m]) / base:.3f}",
            "spread (min-max)": f"{min(rates[m]):.1f}-{max(rates[m]):.1f}", "reps": reps} for m in modes]
    out.append({"how the ranks ran": "writing one rank's record at its end (2000 entries), s",
                "steps/s (median)": f"{_write_time(max(reps, 3)):.4f}", "ratio vs plain torchrun": "",
                "spread (min-max)": "", "reps": max(reps, 3)})
    return out


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run import table

    print(table(TITLE, rows(int(sys.argv[1]) if len(sys.argv) > 1 else 5)))
