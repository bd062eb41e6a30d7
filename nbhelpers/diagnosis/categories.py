"""The failure categories: what each means (its remedies are in :mod:`nbhelpers.diagnosis.remedies`).

The names are those of the shared corpus (``../shared/corpus/README.md``), plus ones the workbook met
itself on real runs (``corpus=False``: no pasted log of them to measure the classifier on).  ``CAUSE`` categories
name something that went wrong by itself; ``CONSEQUENCE`` ones are what the other ranks see after
something went wrong elsewhere (a timeout, a wrapper error), so they rank below any cause found in
the same log.
"""
from __future__ import annotations

from dataclasses import dataclass

from nbhelpers.diagnosis.api import Failure
from nbhelpers.diagnosis.remedies import REMEDIES


@dataclass(frozen=True)
class Category:
    name: str
    title: str
    explanation: str
    cause: bool = True
    corpus: bool = True         # one of the shared corpus's labels

    @property
    def failure(self) -> Failure:
        return Failure(self.name)

    @property
    def remedies(self) -> tuple[str, ...]:
        return REMEDIES[self.failure]


_C = Category
CATEGORIES: dict[str, Category] = {c.name: c for c in [
    _C("rendezvous_timeout", "Rendezvous / init timed out",
       "Ranks could not all meet: the store (MASTER_ADDR:MASTER_PORT) was unreachable, or some ranks never "
       "called init_process_group, so the others timed out waiting for them.",
       cause=False),
    _C("port_in_use", "Rendezvous port already in use",
       "The TCPStore could not listen on the rendezvous port: another job, or a leftover process of an earlier "
       "run, holds it. A rank that connects to such a squatter can hang instead of failing."),
    _C("collective_timeout", "Collective timed out (watchdog / gloo timeout)",
       "A collective waited longer than the process-group timeout. Almost always a rank was late, skipped the "
       "collective, or died: the ranks that time out are victims, not causes.",
       cause=False),
    _C("collective_mismatch", "Collective mismatch between ranks",
       "Ranks called different collectives, in a different order, or with different shapes/dtypes; with "
       "TORCH_DISTRIBUTED_DEBUG=DETAIL PyTorch names the ranks and the fingerprints."),
    _C("nccl_unhandled_cuda_error", "NCCL: unhandled CUDA error",
       "NCCL error 1 (ncclUnhandledCudaError): a CUDA call inside NCCL failed. The CUDA error underneath is the "
       "real cause: driver/toolkit mismatch, a GPU not supported by the build, a bad device, or an earlier "
       "asynchronous CUDA error surfacing here.",
       cause=False),  # NCCL error 1 wraps a CUDA failure: when the log shows which one, that one is the cause
    _C("nccl_system_error", "NCCL: system error",
       "NCCL error 2 (ncclSystemError) or a socket/shared-memory failure inside NCCL: a system call failed, often "
       "/dev/shm too small or unavailable, a socket to a peer that died, or a network set-up problem.",
       cause=False),
    _C("nccl_internal_or_invalid_usage", "NCCL: internal error or invalid usage",
       "NCCL error 3/4/5 (internal error, invalid argument, invalid usage): often two ranks on the same GPU, a "
       "wrong device per rank, topology detection trouble, or a peer's failure reported as 'internal'.",
       cause=False),
    _C("network_interface", "Wrong network interface",
       "Ranks bound to an interface their peers cannot reach: loopback, a docker bridge or veth, or an address "
       "family the host does not support."),
    _C("infiniband", "InfiniBand / RDMA failure",
       "The IB transport failed: completion errors (e.g. 12 = retry exceeded), QP or HCA set-up, GID index. A "
       "peer that died also shows up this way on the others."),
    _C("checkpoint_corrupt", "Checkpoint file corrupt or torn",
       "torch.load read a file that is not a whole checkpoint: still being written by another rank, truncated "
       "by a copy or download, or cut short by a full disk."),
    _C("dataloader_shm", "DataLoader out of shared memory",
       "DataLoader workers pass batches through /dev/shm; it is too small (64 MB is docker's default), so workers "
       "die with a bus error or 'No space left on device'."),
    _C("oom_in_collective", "GPU out of memory in a collective",
       "A rank ran out of GPU memory (possibly inside NCCL, allocating buffers); the others then see closed "
       "connections, internal errors or timeouts."),
    _C("worker_killed", "A rank was killed or died",
       "A rank's process ended abruptly: SIGKILL (exit code -9: usually the host's OOM killer or a scheduler), or a "
       "crash; the surviving ranks then fail with closed connections or timeouts."),
    _C("version_mismatch", "Version mismatch (NCCL, CUDA, driver, GPU architecture)",
       "Two versions that must agree do not: a system libnccl shadowing torch's, a build without kernels for this "
       "GPU, a driver too old for the CUDA build."),
    _C("exit_without_destroy", "Rank aborted at exit: process group never destroyed",
       "A rank ran to the end of its script and then died of SIGABRT while Python shut down ('terminate called "
       "without an active exception'). The script never called dist.destroy_process_group(), so a gloo worker "
       "thread (pt_gloo_runloop) was still letting go of the last collective's tensors during interpreter "
       "shutdown; Python stops a thread that asks for the GIL then, and C++ turns that into std::terminate. It "
       "strikes at random (about one rank exit in five on an idle machine here; workers.exit_abort makes it "
       "certain) and torchrun reports the whole job as failed "
       "although every step ran. When a Python traceback comes first, that error is the cause and the abort is "
       "only how the process ended.",
       cause=False, corpus=False),
    _C("rank_error", "A rank raised an error of its own",
       "One rank's own Python exception ended the job: a bad sample, a failed check, a shape or dtype error, a NaN "
       "guard. The other ranks then time out or lose their connection to it: their errors are consequences.",
       corpus=False),
    _C("ddp_segfault", "DDP crashed in its constructor (segmentation fault)",
       "Every rank died of SIGSEGV with no Python error while DistributedDataParallel was being built. With torch "
       "2.13 on gloo, TORCH_DISTRIBUTED_DEBUG=DETAIL makes DDP's constructor crash in "
       "c10d::Logger::set_env_variables: the debugging switch itself kills the job.",
       corpus=False),
    _C("too_many_ranks", "More ranks than visible GPUs",
       "A rank asked CUDA for a GPU this process cannot see (CUDA's 'invalid device ordinal'): the node starts more "
       "ranks (--nproc-per-node, mp.spawn's nprocs, the launcher's num_processes) than the GPUs CUDA_VISIBLE_DEVICES "
       "leaves it, and each rank uses LOCAL_RANK as its device index. Nothing is wrong with the driver or versions.",
       corpus=False),
]}

CONSEQUENCE = {n for n, c in CATEGORIES.items() if not c.cause}


def run_failure(ruled: Failure | None, classified: Failure | None) -> Failure | None:
    """The failure a run gets: the culprit rule's when it knows one, except that a rank's own error
    (``rank_error``) yields to a cause the log classifier names (a torn checkpoint is the cause of the
    ``torch.load`` error it raised)."""
    if ruled is None:
        return classified
    if ruled is Failure.RANK_ERROR and classified is not None and classified.value not in CONSEQUENCE \
            and classified is not Failure.WORKER_KILLED:
        return classified
    return ruled
IN_CORPUS = {n for n, c in CATEGORIES.items() if c.corpus}
