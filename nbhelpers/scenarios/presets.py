"""The four launch-script presets (basic, gpu_cache, prefetch, conservative) that advice often given for
NCCL timeouts ships, rebuilt from their intent.

That advice lists the settings its launch script used (``NCCL_TIMEOUT=1800``, ``NCCL_BLOCKING_WAIT=1``,
``NCCL_ASYNC_ERROR_HANDLING=1``, ``NCCL_IB_DISABLE=1``, ``NCCL_P2P_DISABLE=1``, ``CUDA_LAUNCH_BLOCKING=1``,
``TORCH_DISTRIBUTED_DEBUG=DETAIL``) without saying which preset set which; ``advised_env`` holds that list
(the last two only in "conservative", the debug preset).  Each corrected preset says, per variable, what
it changes and why, and which advised settings it drops and why.  ``ADVISED_EXPORTS`` also holds, verbatim
for linting, the export blocks of a fix script for an evaluation all_reduce timeout and of a multi-node
debugging guide.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from nbhelpers.runtime.launchconfig import Config

ADVISED_KEYS = {"NCCL_TIMEOUT": "1800", "NCCL_BLOCKING_WAIT": "1", "NCCL_ASYNC_ERROR_HANDLING": "1",
                "NCCL_IB_DISABLE": "1", "NCCL_P2P_DISABLE": "1"}
ADVISED_DEBUG = {"CUDA_LAUNCH_BLOCKING": "1", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}

# Export blocks as written in each source (duplicates collapsed, first value kept): the NCCL-timeout
# advice's key settings, the fix script for an evaluation all_reduce that timed out after 600 s, and a
# guide for a two-node all_reduce test that hangs.
ADVISED_EXPORTS: dict[str, dict[str, str]] = {
    "NCCL-timeout advice": {**ADVISED_KEYS, **ADVISED_DEBUG},
    "evaluation-timeout script": {"NCCL_TIMEOUT": "1800", "NCCL_SOCKET_IFNAME": "eth0", "NCCL_IB_DISABLE": "0",
                 "NCCL_P2P_DISABLE": "0", "NCCL_ASYNC_ERROR_HANDLING": "1", "TORCH_NCCL_TRACE_BUFFER_SIZE": "16384",
                 "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL", "NCCL_IB_HCA": "mlx5_0", "NCCL_IB_TIMEOUT": "22",
                 "NCCL_BUFFSIZE": "8388608"},
    "multi-node debugging guide": {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "ALL", "NCCL_SOCKET_TIMEOUT": "60000",
                 "NCCL_CONNECT_TIMEOUT": "60000", "NCCL_IB_TIMEOUT": "23", "NCCL_IB_RETRY_CNT": "7",
                 "NCCL_IB_DISABLE": "0", "NCCL_NET_GDR_LEVEL": "2", "NCCL_IB_HCA": "mlx5", "NCCL_SOCKET_IFNAME": "ib0",
                 "NCCL_IB_GID_INDEX": "3", "TORCH_DISTRIBUTED_DEBUG": "DETAIL", "NCCL_BLOCKING_WAIT": "1",
                 "PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"},
}


@dataclass(frozen=True)
class Change:
    name: str
    value: str
    why: str


@dataclass(frozen=True)
class Dropped:
    name: str
    advised_value: str
    why: str


@dataclass(frozen=True)
class Preset:
    """A corrected preset: the env it sets (each with its reason), the advised settings it drops, a timeout."""

    name: str
    intent: str  # what the original advice meant it for
    summary: str  # what the corrected preset does
    advised_env: dict
    changes: tuple[Change, ...]
    dropped: tuple[Dropped, ...]
    timeout_s: int
    in_code: str = ""  # what belongs in the training script, not in the environment

    @property
    def env(self) -> dict[str, str]:
        return {c.name: c.value for c in self.changes}

    def config(self, timeout_s: int | None = None, **env) -> Config:
        cfg = Config(self.name, self.env, self.timeout_s, self.summary)
        return cfg.variant(self.name, timeout_s, **env) if (env or timeout_s is not None) else cfg

    def table(self):
        """One row per variable: the advised value, the corrected value, and why."""
        import pandas as pd

        rows = [{"variable": c.name, "advised": self.advised_env.get(c.name, ""), "corrected": c.value, "why": c.why}
                for c in self.changes]
        rows += [{"variable": d.name, "advised": d.advised_value, "corrected": "(removed)", "why": d.why}
                 for d in self.dropped]
        rows.append({"variable": "process-group timeout", "advised": self.advised_env.get("NCCL_TIMEOUT", ""),
                     "corrected": f"{self.timeout_s} s, in code",
                     "why": "init_process_group(timeout=timedelta(seconds=N)): the only setting that bounds a "
                            "collective; no env var does."})
        return pd.DataFrame(rows)


_ASYNC = Change("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1",
                "The advised NCCL_ASYNC_ERROR_HANDLING is the deprecated name. 1 = on a failed or timed-out "
                "collective the watchdog aborts the communicator and ends the process, so torchrun sees a "
                "failure instead of a hang (torchrun sets 1 when unset; explicit keeps it under other launchers).")
_WARN = Change("NCCL_DEBUG", "WARN", "Unset, NCCL prints nothing when it fails; WARN prints its errors and costs "
                                      "nothing.")
_DUMP = Change("TORCH_NCCL_DUMP_ON_TIMEOUT", "1", "On a timeout every rank dumps its flight recorder (the last "
                                                   "collectives each rank entered): the record that names the "
                                                   "rank that fell behind. Default in 2.13, off in older 2.x.")
_TRACE = Change("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000", "The flight recorder's size (0 = off in older 2.x, so "
                                                        "the dump would be empty). 2000 entries, not the advised "
                                                        "16384: a hang needs the last few collectives.")
_FR = Change("TORCH_FR_BUFFER_SIZE", "2000", "The same size under the Flight Recorder's newer name, which "
                                             "PyTorch 2.13 reads first: set both to the same value.")

_D_TIMEOUT = Dropped("NCCL_TIMEOUT", "1800", "Nothing reads it: it changes no timeout. The timeout is "
                                             "init_process_group(timeout=...), set in code (see the last row).")
_D_BLOCKING = Dropped("NCCL_BLOCKING_WAIT", "1", "Deprecated name of TORCH_NCCL_BLOCKING_WAIT, which makes "
                                                 "wait() block and starts no watchdog; async error handling "
                                                 "(above) already turns a stuck collective into an error.")
_D_IB = Dropped("NCCL_IB_DISABLE", "1", "A Debugging switch: moves traffic from InfiniBand to TCP (much slower) "
                                        "and hides the IB fault. Try it once to see whether IB is at fault, then "
                                        "fix IB.")
_D_P2P = Dropped("NCCL_P2P_DISABLE", "1", "A Debugging switch: moves GPU-to-GPU traffic through host memory and "
                                          "hides broken P2P (IOMMU/ACS). Try it once as an experiment, not as a "
                                          "setting.")
_D_ASYNC = Dropped("NCCL_ASYNC_ERROR_HANDLING", "1", "Deprecated name: replaced by "
                                                     "TORCH_NCCL_ASYNC_ERROR_HANDLING (above).")
_BASE_DROPS = (_D_TIMEOUT, _D_BLOCKING, _D_ASYNC, _D_IB, _D_P2P)
_BASE = (_ASYNC, _WARN, _DUMP, _TRACE, _FR)


def omp_threads_per_rank(nproc_per_node: int = 2, cores: int | None = None) -> int:
    """Cores divided among the ranks of a node (at least 1): more threads than that oversubscribe."""
    return max(1, (cores or os.cpu_count() or 1) // max(1, nproc_per_node))


def _build(nproc_per_node: int = 2) -> dict[str, Preset]:
    omp = omp_threads_per_rank(nproc_per_node)
    return {p.name: p for p in (
        Preset("basic", "basic NCCL optimisation, the first thing to try",
               "Production-safe: failures end the job with NCCL's error and a flight-recorder dump; nothing "
               "slows the job.", dict(ADVISED_KEYS), _BASE, _BASE_DROPS, 600),
        Preset("gpu_cache", "'use a GPU cache to reduce memory use' (the training script's --use_gpu_cache)",
               "basic + the allocator setting that fights fragmentation ('CUDA out of memory' while memory is "
               "free). --use_gpu_cache itself is a flag of the training script and stays there.",
               dict(ADVISED_KEYS),
               _BASE + (Change("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True",
                               "Lets the caching allocator grow segments instead of splitting them: less "
                               "fragmentation, fewer OOMs with free memory. The multi-node guide's "
                               "max_split_size_mb:128 is the older, blunter knob. CUDA only: no effect on CPU "
                               "runs."),),
               _BASE_DROPS, 600,
               in_code="Batch size and what is cached on the GPU are the script's choices."),
        Preset("prefetch", "'prefetch to speed up data loading'",
               "basic + CPU threads per rank sized to the node. Prefetching itself is DataLoader code, not an "
               "environment variable.", dict(ADVISED_KEYS),
               _BASE + (Change("OMP_NUM_THREADS", str(omp),
                               f"torchrun sets 1 thread per rank when unset (with a warning); cores / ranks per "
                               f"node (= {omp} here) lets each rank's CPU-side work (preprocessing in the main "
                               f"process, CPU ops) use its share without oversubscribing. It does not speed up "
                               f"communication."),),
               _BASE_DROPS, 600,
               in_code="DataLoader(num_workers=4, prefetch_factor=2, pin_memory=True, persistent_workers=True): "
                       "prefetching is set there."),
        Preset("conservative", "'the most conservative configuration', recommended for a first try",
               "For debugging: NCCL logs init and network choices, every collective is checked across ranks "
               "(shape mismatches become errors naming both shapes), a timeout dumps who was where, and the "
               "timeout is short so a hang fails within minutes and names the late rank.",
               {**ADVISED_KEYS, **ADVISED_DEBUG},
               (_ASYNC,
                Change("NCCL_DEBUG", "INFO", "Logs NCCL's version, the network and interface chosen, each "
                                             "channel's transport and 'Init COMPLETE' (the table in this "
                                             "notebook's NCCL section)."),
                Change("NCCL_DEBUG_SUBSYS", "INIT,NET", "Narrows INFO to init and network; the advised ALL "
                                                        "floods the log with every call."),
                Change("TORCH_DISTRIBUTED_DEBUG", "DETAIL", "Checks every collective's shapes across ranks before "
                                                            "running it: a mismatch raises an error naming both "
                                                            "shapes instead of a SIGABRT or a hang. Costs time: "
                                                            "debugging only. Not with DDP on gloo: torch 2.13's "
                                                            "DDP constructor segfaults under DETAIL."),
                Change("TORCH_NCCL_DESYNC_DEBUG", "1", "On a timeout the watchdog reports which rank fell behind "
                                                       "or ran a different collective."),
                _DUMP, _TRACE, _FR,
                Change("TORCH_SHOW_CPP_STACKTRACES", "1", "C++ stack traces on errors from PyTorch's C++ code.")),
               _BASE_DROPS + (
                   Dropped("CUDA_LAUNCH_BLOCKING", "1", "Makes every kernel launch synchronous: much slower, and "
                                                        "it changes timing, so a hang can move or vanish. Use it "
                                                        "only to pin down a CUDA error."),),
               120, in_code="dist.monitored_barrier(timeout=...) at suspect points names the rank that did not "
                            "arrive (gloo); num_workers=0 in the DataLoader rules out worker problems."),
    )}


def presets(nproc_per_node: int = 2) -> dict[str, Preset]:
    """The four corrected presets, with OMP_NUM_THREADS sized for ``nproc_per_node`` ranks on this host."""
    return _build(nproc_per_node)


def preset(name: str, nproc_per_node: int = 2) -> Preset:
    found = presets(nproc_per_node)
    if name not in found:
        raise KeyError(f"no preset {name!r}; choose one of {', '.join(found)}")
    return found[name]
