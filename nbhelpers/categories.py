"""The failure categories: what each means and what to do, each remedy naming its notebook.

The names are those of the shared corpus (``../shared/corpus/README.md``), plus ones the workbook met
itself on real runs (``corpus=False``: no pasted log of them to measure the classifier on).  ``CAUSE`` categories
name something that went wrong by itself; ``CONSEQUENCE`` ones are what the other ranks see after
something went wrong elsewhere (a timeout, a wrapper error), so they rank below any cause found in
the same log.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Category:
    name: str
    title: str
    explanation: str
    remedies: tuple[str, ...]
    cause: bool = True
    corpus: bool = True         # one of the shared corpus's labels


_C = Category
CATEGORIES: dict[str, Category] = {c.name: c for c in [
    _C("rendezvous_timeout", "Rendezvous / init timed out",
       "Ranks could not all meet: the store (MASTER_ADDR:MASTER_PORT) was unreachable, or some ranks never "
       "called init_process_group, so the others timed out waiting for them.",
       ("Find the rank that did not join: the store key or 'N/M clients joined' says how many came; its own log and "
        "stack say why (notebook 01, fault 'never-join').",
        "Check that every node uses the same MASTER_ADDR/MASTER_PORT (or --rdzv-endpoint) and can reach it: "
        "notebook 05's port and route checks.",
        "Only then consider a longer init timeout (init_process_group(timeout=...)); it rarely cures this."),
       cause=False),
    _C("port_in_use", "Rendezvous port already in use",
       "The TCPStore could not listen on the rendezvous port: another job, or a leftover process of an earlier "
       "run, holds it. A rank that connects to such a squatter can hang instead of failing.",
       ("Pick a free port (torchrun --rdzv-endpoint host:0 / --standalone, or MASTER_PORT) per job; notebook 01's "
        "launcher checks the port before launching.",
        "Look for leftover processes of an earlier run (`ss -ltnp | grep PORT`) and stop them.")),
    _C("collective_timeout", "Collective timed out (watchdog / gloo timeout)",
       "A collective waited longer than the process-group timeout. Almost always a rank was late, skipped the "
       "collective, or died: the ranks that time out are victims, not causes.",
       ("Find the rank that was not in the collective: compare per-rank sequence numbers, use monitored_barrier or "
        "TORCH_DISTRIBUTED_DEBUG=DETAIL (notebook 03), and read the stacks of the living ranks (notebook 01).",
        "Check whether the size could really take that long: 'slow or stuck?' in notebook 03 (a 600 s timeout "
        "on a few GB means stuck, not slow).",
        "Do not rely on NCCL_TIMEOUT (it does not exist) or signal.alarm; set init_process_group(timeout=...)."),
       cause=False),
    _C("collective_mismatch", "Collective mismatch between ranks",
       "Ranks called different collectives, in a different order, or with different shapes/dtypes; with "
       "TORCH_DISTRIBUTED_DEBUG=DETAIL PyTorch names the ranks and the fingerprints.",
       ("Run with TORCH_DISTRIBUTED_DEBUG=DETAIL to get the first mismatching collective and the ranks (notebook 03).",
        "Look for data-dependent control flow: a rank that skips a collective, variable-length tensors in "
        "all_gather, a collective inside `if rank == 0:` (notebooks 03, 04).")),
    _C("nccl_unhandled_cuda_error", "NCCL: unhandled CUDA error",
       "NCCL error 1 (ncclUnhandledCudaError): a CUDA call inside NCCL failed. The CUDA error underneath is the "
       "real cause: driver/toolkit mismatch, a GPU not supported by the build, a bad device, or an earlier "
       "asynchronous CUDA error surfacing here.",
       ("Rerun with NCCL_DEBUG=INFO (and CUDA_LAUNCH_BLOCKING=1 while debugging) to see the failing CUDA call "
        "(notebook 02).",
        "Check the driver, CUDA build and GPU architecture agree (`nvidia-smi`, torch.version.cuda, the fingerprint "
        "in notebook 01)."),
       cause=False),  # NCCL error 1 wraps a CUDA failure: when the log shows which one, that one is the cause
    _C("nccl_system_error", "NCCL: system error",
       "NCCL error 2 (ncclSystemError) or a socket/shared-memory failure inside NCCL: a system call failed, often "
       "/dev/shm too small or unavailable, a socket to a peer that died, or a network set-up problem.",
       ("Rerun with NCCL_DEBUG=INFO to see which system call failed (notebook 02).",
        "If it is shared memory: give the container more /dev/shm (`--shm-size`, `--ipc=host`) rather than "
        "disabling transports (notebook 04).",
        "If a peer closed the connection: that peer's own log holds the cause."),
       cause=False),
    _C("nccl_internal_or_invalid_usage", "NCCL: internal error or invalid usage",
       "NCCL error 3/4/5 (internal error, invalid argument, invalid usage): often two ranks on the same GPU, a "
       "wrong device per rank, topology detection trouble, or a peer's failure reported as 'internal'.",
       ("Make each rank use its own GPU: torch.cuda.set_device(LOCAL_RANK) before init (notebook 01).",
        "Rerun with NCCL_DEBUG=INFO (or WARN) to get the 'Last error' line (notebook 02).",
        "Check the other ranks' logs for an out-of-memory or crash that NCCL wraps as internal."),
       cause=False),
    _C("network_interface", "Wrong network interface",
       "Ranks bound to an interface their peers cannot reach: loopback, a docker bridge or veth, or an address "
       "family the host does not support.",
       ("Set GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME to the interface that routes between nodes (notebook 05 shows "
        "which one each library would pick).",
        "Make the hostname resolve to a routable address, not 127.0.x.x (/etc/hosts).")),
    _C("infiniband", "InfiniBand / RDMA failure",
       "The IB transport failed: completion errors (e.g. 12 = retry exceeded), QP or HCA set-up, GID index. A "
       "peer that died also shows up this way on the others.",
       ("Check the links (`ibstat`, `ibv_devinfo`) and NCCL_IB_HCA / NCCL_IB_GID_INDEX; look for a peer that died "
        "first (notebook 05).",
        "NCCL_IB_DISABLE=1 is a debugging step to confirm IB is at fault, not a fix (notebook 02).")),
    _C("checkpoint_corrupt", "Checkpoint file corrupt or torn",
       "torch.load read a file that is not a whole checkpoint: still being written by another rank, truncated "
       "by a copy or download, or cut short by a full disk.",
       ("If ranks load what rank 0 is saving: save to a temp file and os.replace, then barrier, then load "
        "(notebook 04 measures each fix).",
        "Otherwise compare the file size with the source, re-download or re-copy, and check free disk space.")),
    _C("dataloader_shm", "DataLoader out of shared memory",
       "DataLoader workers pass batches through /dev/shm; it is too small (64 MB is docker's default), so workers "
       "die with a bus error or 'No space left on device'.",
       ("Give the container more shared memory: `docker run --shm-size=16g` or `--ipc=host` (notebook 04).",
        "Short term: fewer workers or smaller batches; num_workers=0 only to confirm.")),
    _C("oom_in_collective", "GPU out of memory in a collective",
       "A rank ran out of GPU memory (possibly inside NCCL, allocating buffers); the others then see closed "
       "connections, internal errors or timeouts.",
       ("Find the rank with 'out of memory' first: its memory use is the cause (notebook 01's stage timeline shows "
        "where it failed).",
        "Leave headroom for NCCL buffers (lower the batch, shard more, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True);"
        " chunking a huge collective reduces peak memory (notebook 03).")),
    _C("worker_killed", "A rank was killed or died",
       "A rank's process ended abruptly: SIGKILL (exit code -9: usually the host's OOM killer or a scheduler), or a "
       "crash; the surviving ranks then fail with closed connections or timeouts.",
       ("Check `dmesg` / `journalctl -k` for the OOM killer and host memory (notebook 01 names the killed rank).",
        "Reduce host memory per rank (DataLoader workers, pinned memory, loading checkpoints on every rank).")),
    _C("version_mismatch", "Version mismatch (NCCL, CUDA, driver, GPU architecture)",
       "Two versions that must agree do not: a system libnccl shadowing torch's, a build without kernels for this "
       "GPU, a driver too old for the CUDA build.",
       ("Compare versions across nodes and libraries: the fingerprint (notebook 01) shows torch, CUDA and NCCL "
        "per rank.",
        "Remove or stop preloading a conflicting system libnccl (LD_LIBRARY_PATH, LD_PRELOAD); install a torch build "
        "for this GPU architecture and driver.")),
    _C("exit_without_destroy", "Rank aborted at exit: process group never destroyed",
       "A rank ran to the end of its script and then died of SIGABRT while Python shut down ('terminate called "
       "without an active exception'). The script never called dist.destroy_process_group(), so a gloo worker "
       "thread (pt_gloo_runloop) was still letting go of the last collective's tensors during interpreter "
       "shutdown; Python stops a thread that asks for the GIL then, and C++ turns that into std::terminate. It "
       "strikes at random (about one rank exit in five on an idle machine here; workers.exit_abort makes it "
       "certain) and torchrun reports the whole job as failed "
       "although every step ran. When a Python traceback comes first, that error is the cause and the abort is "
       "only how the process ended.",
       ("Call dist.destroy_process_group() at the end of every rank, in a `finally:` so that it runs after an "
        "error too (pytorch/pytorch#190489).",
        "Wait on async collectives (`work.wait()`) before the script ends.",
        "A longer timeout or a restart does not help: nothing hung, and the same run may pass next time."),
       cause=False, corpus=False),
]}

CONSEQUENCE = {n for n, c in CATEGORIES.items() if not c.cause}
IN_CORPUS = {n for n, c in CATEGORIES.items() if c.corpus}
