"""Turn a wall of distributed-training log text into a diagnosis, best finding first.

    findings = classify(text)              # or classify_file(path), classify_stream(lines)
    findings[0].category, findings[0].evidence, findings[0].remedies

Rules are data: a category, a lower-case literal *needle* that must occur on the line, an optional
regex that must then match it, and a weight.  Text is scanned in large chunks: one Aho-Corasick
pass (ahocorasick-rs, over bytes) finds every needle at once and only those lines are examined, so a
gigabyte of NCCL INFO chatter streams through without being held in memory.  Scores add up per category with diminishing returns; causes
(an OOM, a killed rank, a torn file, a bad interface) outrank consequences (timeouts, NCCL's
wrapper errors) seen in the same log, so a watchdog timeout on rank 3 after rank 5 was OOM-killed
is reported as the kill.
"""
from __future__ import annotations

import io
import os
import re
from collections import OrderedDict
from pathlib import Path
from dataclasses import dataclass, field
from typing import Iterable, Iterator

from nbhelpers.diagnosis.api import Failure
from nbhelpers.diagnosis.api import Rule as CulpritRule  # classify's own Rule is a row of its rule table
from nbhelpers.diagnosis.categories import CATEGORIES, CONSEQUENCE
from nbhelpers.diagnosis.remedies import REMEDIES
from nbhelpers.diagnosis.watchdog import SHORT_TIMEOUT_MS, timeout_ms

CHUNK = 4 << 20
TAIL_BYTES = 1 << 16
MAX_EVIDENCE = 4
MESSAGES = Path(__file__).resolve().parent.parent / "data" / "library_messages.jsonl"  # what the source rules match
NOISE = re.compile(r"FutureWarning|DeprecationWarning|UserWarning|is deprecated|will be removed in", re.I)


@dataclass(frozen=True)
class Rule:
    category: str
    needle: str                 # lower-case literal that must be on the line
    pattern: str | None = None  # regex (case-insensitive) that must then match the line
    weight: float = 3.0
    context: bool = False       # counts only if the log also holds a non-context finding
    alone: bool = False         # counts only if no other category has a finding (a launcher's report of any failure)
    origin: bool = False        # an NCCL trace frame ("net_ib.cc:282 -> 2") that counts only where the error began:
                                # the line before it is not a frame too
    in_warnings: bool = False   # also fires on a deprecation/user warning line (torch warns some real errors)
    hint: bool = False          # never counts: shown as a hint (:func:`hints`) when the log has no finding

    def matches(self, line: str) -> bool:
        return self.pattern is None or _compiled(self.pattern).search(line) is not None


_REGEX: dict[str, re.Pattern] = {}


def _compiled(p: str) -> re.Pattern:
    if p not in _REGEX:
        _REGEX[p] = re.compile(p, re.I)
    return _REGEX[p]


R = Rule
BRIDGE_OR_LINK_LOCAL = r"(\]|using )\S*:(172\.17\.\d+\.\d+|169\.254\.\d+\.\d+)<|:avahi:"
RULES: list[Rule] = [
    # rendezvous / init
    R("rendezvous_timeout", "timed out initializing process group", weight=6),
    R("rendezvous_timeout", "store based barrier", r"timed out", 4),
    R("rendezvous_timeout", "waiting in store based barrier", weight=2, context=True),  # normal while ranks arrive
    R("rendezvous_timeout", "clients joined", r"\d+/\d+ clients joined", 6),
    R("rendezvous_timeout", "waiting for clients", weight=5),
    R("rendezvous_timeout", "while trying to connect to", r"client socket has timed out after \d+ ?m?s", 6),
    R("rendezvous_timeout", "rendezvoustimeouterror", weight=6),
    R("rendezvous_timeout", "rendezvousconnectionerror", weight=6),
    R("rendezvous_timeout", "connection to the c10d store has failed", weight=5),
    # the store's constructor losing its connection: "TCPStore( RuntimeError: Connection reset by peer"
    R("rendezvous_timeout", "tcpstore(", r"reset by peer|connection refused|broken pipe", 5),
    R("rendezvous_timeout", "socket timeout", r"store|recvbytes|runtimeerror: socket timeout|got error", 5),
    R("rendezvous_timeout", "wait timeout after", r"wait timeout after \d+ ?ms, keys", 6),
    R("rendezvous_timeout", "diststoreerror", weight=4),
    R("rendezvous_timeout", "_store_based_barrier", weight=3),
    R("rendezvous_timeout", "_share_and_gather", weight=2),
    R("rendezvous_timeout", "retrieving nccluniqueid", r"got error|timeout", 5),
    # the client gave up on the store: "...has failed to connect to any network address of (host, port)" (2.x),
    # vLLM/2.4+ "TCP client failed to connect/validate to host"; single refused attempts are retried (context only)
    R("rendezvous_timeout", "failed to connect to any network address", weight=5),
    R("rendezvous_timeout", "failed to connect/validate", weight=5),
    R("rendezvous_timeout", "client socket has failed to connect", weight=1.5, context=True),
    # ...unless the connect itself timed out or found no route (errno 110, 113; Windows: 10060 timed out, 10049 not a
    # valid address): nothing answers at that address; a store not up yet refuses (111), retried while a job assembles
    R("rendezvous_timeout", "client socket has failed to connect", r"errno: (110|113)\b|system error: 100(49|60)\b", 3),
    # port in use
    R("port_in_use", "eaddrinuse", weight=8),
    R("port_in_use", "address already in use", weight=8),
    R("port_in_use", "errno: 98", weight=7),
    R("port_in_use", "failed to listen on any local network address", weight=6),
    R("port_in_use", "failed to bind", r"server socket has failed to bind", 6),
    # collective timeout (a consequence)
    R("collective_timeout", "watchdog caught collective operation timeout", weight=6),
    R("collective_timeout", "watchdog caught collective", r"watchdog caught collective(?! operation timeout)", 5),  # cut
    R("collective_timeout", "ran for", r"ran for \d+ milliseconds before timing out", 4),
    R("collective_timeout", "for recv operation", r"timed out waiting \S+ ?ms for recv operation", 6),
    R("collective_timeout", "for send operation", r"timed out waiting \d+ ?ms for send operation", 6),
    R("collective_timeout", "watchdog got stuck", weight=5),
    R("collective_timeout", "detected by watchdog", r"^(?!.*nccl error is detected)", 3),  # not an NCCL error's report
    R("collective_timeout", "failed to pass monitoredbarrier", weight=5),
    R("collective_timeout", "some nccl operations have failed or timed out", weight=1.5),
    R("collective_timeout", "timeout(ms)=", r"opType=\w+.*Timeout\(ms\)=\d+", 2),
    # collective mismatch
    R("collective_mismatch", "detected mismatch between collectives", weight=9),
    R("collective_mismatch", "collective mismatch", r"^(?!.*net/ib)", 6),  # not NCCL's IB "collective mismatch error"
    R("collective_mismatch", "doesn't match expected size", weight=7),
    R("collective_mismatch", "is running collective", r"but rank \d+ is running collective", 8),
    R("collective_mismatch", "collectivefingerprint", weight=2),
    R("collective_mismatch", "mismatched collective detected", weight=8),
    R("collective_mismatch", "tensor shapes:", r"tensor shapes: \d+\s*vs\s*\d+", 6),
    # NCCL error classes (1 unhandled cuda, 2 system, 3 internal, 4 invalid argument, 5 invalid usage, 6 remote)
    R("nccl_unhandled_cuda_error", "unhandled cuda error", weight=7),
    R("nccl_unhandled_cuda_error", "ncclunhandledcudaerror", weight=7),
    R("nccl_unhandled_cuda_error", "nccl error 1", r"nccl error 1\b", 6),
    R("nccl_unhandled_cuda_error", "cuda failure", r"cuda failure(?!.*out of memory)", 5),
    R("nccl_unhandled_cuda_error", "call to cuda function failed", weight=5),
    R("nccl_system_error", "unhandled system error", weight=6),
    R("nccl_system_error", "unhanled system error", weight=6),  # NCCL 2.4's spelling (torch 1.1)
    R("nccl_system_error", "ncclsystemerror", weight=6),
    R("nccl_system_error", "nccl error 2", r"nccl error 2\b", 6),
    R("nccl_system_error", "system call (socket, malloc", weight=4),
    R("nccl_system_error", "shared memory segment", r"nccl|/dev/shm/nccl", 6),
    R("nccl_system_error", "shmutils", r"warn", 4),
    # NCCL's own /dev/shm segments (SHM transport), any NCCL version: "include/shm.h:28 NCCL WARN Call to
    # posix_fallocate failed : No space left on device", "failed to extend /dev/shm/nccl-XXXX"
    R("nccl_system_error", "posix_fallocate", r"fail", 5),
    R("nccl_system_error", "no space left on device", r"nccl", 5),
    R("nccl_system_error", "/dev/shm/nccl", r"warn|fail|error", 4),
    R("nccl_system_error", "ncclremoteerror", weight=4),
    R("nccl_system_error", "remote process exited or there was a network error", weight=3),
    R("nccl_system_error", "connection closed by remote peer", r"nccl|warn", 2.5),
    R("nccl_system_error", "net : call to", r"failed", 3),
    R("nccl_system_error", "failed to execute operation", r"retcode", 2),
    R("nccl_system_error", "connect to", r"nccl warn.*connect to .* failed", 4),
    # "Call to connect returned Connection refused" (2.x), "Call to connect timeout : Connection refused" and
    # "Call to connect failed : Connection timed out" (NCCL 2.3/2.4)
    # the "..., retrying" INFO lines count too: in the training split they are all that failing logs show (2 of 2)
    R("nccl_system_error", "call to connect", r"refused|abort|reset|unreachable|timed out|timeout", 3),
    R("nccl_system_error", "software caused connection abort", r"nccl|socket", 3),
    R("nccl_internal_or_invalid_usage", "internal error - please report", weight=5),
    R("nccl_internal_or_invalid_usage", "ncclinternalerror", weight=5),
    R("nccl_internal_or_invalid_usage", "invalid usage", r"invalid usage|ncclinvalidusage", 6),
    R("nccl_internal_or_invalid_usage", "ncclinvalidargument", weight=6),
    R("nccl_internal_or_invalid_usage", "nccl error 3", r"nccl error (3|4|5)\b", 5),
    R("nccl_internal_or_invalid_usage", "nccl error 4", r"nccl error (3|4|5)\b", 5),
    R("nccl_internal_or_invalid_usage", "nccl error 5", r"nccl error (3|4|5)\b", 5),
    R("nccl_internal_or_invalid_usage", "duplicate gpu detected", weight=8),
    # PyTorch 1.x: "NCCL error in: <file>:<line>, <ncclGetErrorString>, NCCL version x.y.z"
    R("nccl_internal_or_invalid_usage", "nccl error in:", r", (invalid argument|invalid usage|internal error)", 5),
    R("nccl_system_error", "nccl error in:", r", (unhandled system error|remote process exited)", 5),
    R("nccl_unhandled_cuda_error", "nccl error in:", r", unhandled cuda error", 5),
    R("nccl_internal_or_invalid_usage", "of node nic not found", weight=4),
    # NCCL traces a failing call's result up the stack at INFO level ("bootstrap.cc:543 -> 3"); single frames also
    # show in healthy runs (topology probes on VMs fail and are skipped), but "-> N [Async thread]" (group.cc,
    # ncclAsyncJobMain) means a communicator's init job failed.  N is the ncclResult_t: 1 unhandled CUDA error,
    # 2 system error, 3 internal error, 4 invalid argument, 5 invalid usage, 6 remote error.  Weak: the WARN says more.
    R("nccl_unhandled_cuda_error", "[async thread]", r"nccl info .*-> 1 \[async thread\]", 2.5),
    R("nccl_system_error", "[async thread]", r"nccl info .*-> [26] \[async thread\]", 2.5),
    R("nccl_internal_or_invalid_usage", "[async thread]", r"nccl info .*-> [345] \[async thread\]", 2.5),
    # network interface
    R("network_interface", "unable to resolve hostname", weight=6),
    R("network_interface", "loopback", r"using the loopback address as fallback|loopback\s+address as fallback", 5),
    R("network_interface", "connectfullmesh failed", weight=4),
    # NCCL's "Socket creation failed : Address family not supported" is an error; c10d's "[W] ... cannot be
    # initialized on [::]:29500 (errno: 97 ...)" is its warning that IPv6 is off, after which it tries IPv4: harmless
    # next to any other error; alone, a hint (threads split on it: five healthy runs against two interface problems
    # of the training split and one of the dev set, whose real cause the warning did not show)
    R("network_interface", "address family not supported", r"^(?!.*cannot be initialized)", 6),
    R("network_interface", "errno: 97", r"^(?!.*cannot be initialized)", 5),
    R("network_interface", "cannot be initialized", r"errno: 97\b", 3, hint=True),
    R("network_interface", "unable to find address for", weight=7),
    R("network_interface", "no socket interface found", weight=7),
    R("network_interface", "no usable listening interface", weight=7),
    # NCCL bootstrapping from an interface that gave no usable address (e.g. NCCL_SOCKET_IFNAME names none):
    # "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)"
    R("network_interface", "is neither af_inet", weight=6),
    R("network_interface", "socket_ifname", r"(gloo|nccl)_socket_ifname.*\b(not found|no|fail\w*|invalid|unable)\b", 4),
    R("network_interface", "]br-", r"^\s*\[\d+\]br-[0-9a-f]+:", 5, context=True),
    R("network_interface", "]veth", r"^\s*\[\d+\]veth\w+:", 4, context=True),
    R("network_interface", "]docker", r"^\s*\[\d+\]docker\d*:", 4, context=True),
    R("network_interface", "net/socket : using", r"\[\d+\](br-|veth|docker|virbr|lo:)", 5, context=True),
    # NCCL <= 2.4 wording: "NET : Using interface lo:127.0.0.1<0>", "... eth1:fe80::215:5dff:fe33:ff6d%eth1<0>"
    R("network_interface", "using interface", r"using interface (\S+:(fe80::|127\.)|(lo|docker\d*|veth\w*|br-\w+|virbr\d*):)",
      5, context=True),
    # NCCL bootstrapping on an address peers cannot use: IPv6 link-local, loopback, a container bridge
    # (2.7+ lists them on one line: "Bootstrap : Using [0]eno4:10.3.68.117<0> [1]vethe94aab9:fe80::a86b:...")
    R("network_interface", "bootstrap : using", r"using (\[\d+\])?\S+:(fe80::|127\.)|using (lo|docker\d*|veth\w*|br-\w+|virbr\d*):|"
      r"\[\d+\](lo|docker\d*|veth\w*|br-\w+|virbr\d*):|\[\d+\]\S+:fe80::", 6, context=True),
    # ... or on docker's default bridge (172.17.0.0/16: only this host reaches it) or a link-local address
    # (169.254.x.x, an avahi alias): a healthy one-host run prints the same, so these are hints only
    R("network_interface", "bootstrap : using", BRIDGE_OR_LINK_LOCAL, 3, hint=True),
    R("network_interface", "net/socket : using", BRIDGE_OR_LINK_LOCAL, 3, hint=True),
    # InfiniBand
    R("infiniband", "got completion from peer", r"(error|status)\s*=?\s*\d+", 8),
    R("infiniband", "warn net/ib", weight=5),
    R("infiniband", "net/ib : unable", weight=5),
    R("infiniband", "ibv_", r"fail|error|unable", 6),
    R("infiniband", "ib_plugin", r"warn", 5),
    R("infiniband", "wc_retry_exc_err", weight=7),
    R("infiniband", "ibv_wc", r"err", 6),
    # checkpoint
    R("checkpoint_corrupt", "central directory", weight=9),
    R("checkpoint_corrupt", "pytorchstreamreader failed", weight=8),
    R("checkpoint_corrupt", "pytorchstreamwriter failed", weight=8),
    R("checkpoint_corrupt", "file write failed", r"unexpected pos|pytorchstream|inline_container", 6),
    R("checkpoint_corrupt", "unpicklingerror", weight=5),
    R("checkpoint_corrupt", "invalid load key", weight=6),
    R("checkpoint_corrupt", "is a zip archive (did you mean to use torch.jit.load", weight=6),
    R("checkpoint_corrupt", "write_record", weight=5),
    R("checkpoint_corrupt", "unexpected pos", r"inline_container|unexpected pos \d+ vs \d+", 6),  # torch.save, disk full
    R("checkpoint_corrupt", "opened_zipfile", weight=3),
    R("checkpoint_corrupt", "_open_zipfile_reader", weight=3),
    R("checkpoint_corrupt", "pytorchfilereader", weight=3),
    R("checkpoint_corrupt", "ran out of input", r"eoferror", 4),
    R("checkpoint_corrupt", "pickle data was truncated", weight=6),
    R("checkpoint_corrupt", "the file might be corrupted", weight=7),  # torch legacy load: "unexpected EOF, expected N more bytes"
    R("checkpoint_corrupt", "error while deserializing header", weight=6),  # safetensors
    # torch.load of an empty or just-created file: a bare "EOFError" ends the traceback (notebook 04)
    R("checkpoint_corrupt", "eoferror", r"^\W*(\[rank\d+\]:\s*)?eoferror\s*$", 3),
    R("checkpoint_corrupt", "not a zip archive", r"pytorchstreamreader|zip archive", 6),
    # DataLoader shared memory
    R("dataloader_shm", "out of shared memory", weight=8),
    R("dataloader_shm", "insufficient shared memory", weight=8),
    R("dataloader_shm", "is killed by signal: bus error", weight=8),
    R("dataloader_shm", "unable to write to file </torch", weight=7),
    R("dataloader_shm", "unable to allocate shared memory", weight=7),
    R("dataloader_shm", "no space left on device", r"^(?!.*(nccl|checkpoint|save))(?=.*(errno 28|shm|torch_|dataloader))", 4),
    R("dataloader_shm", "unable to open shared memory object", weight=7),
    # the bare "DataLoader worker (pid(s) N) exited unexpectedly": in containers mostly a too small /dev/shm; weak on
    # purpose, so a bus error, a kill or a traceback elsewhere in the log decides instead
    R("dataloader_shm", "exited unexpectedly", r"dataloader worker", 3),
    R("dataloader_shm", "unable to mmap", r"</torch_", 6),
    R("dataloader_shm", "shm-size", weight=3),
    # GPU OOM
    R("oom_in_collective", "out of memory", r"cuda (failure|error).*out of memory|cuda out of memory|"
      r"outofmemoryerror|nccl warn.*out of memory", 8),
    R("oom_in_collective", "failed to cuda calloc", weight=6),
    R("oom_in_collective", "failed to cuda malloc", weight=6),
    R("oom_in_collective", "cudaerrormemoryallocation", weight=7),
    # host memory running out inside a collective: gloo allocates its flat all_gather buffer on the CPU (a real run:
    # tests/data/runs/user-oom-allgather, a rank capped by RLIMIT_AS); the peers then see the connection reset
    R("oom_in_collective", "defaultcpuallocator", r"can't allocate memory|not enough memory", 6),
    # a rank killed or dead
    R("worker_killed", "exitcode", r"exitcode\s*:?\s*-9\b", 7),
    R("worker_killed", "return code", r"return code\s*=\s*-9\b", 7),
    R("worker_killed", "signal 9", r"signal 9 \(sigkill\)", 7),
    R("worker_killed", "sigkill", r"(received|died with|killed by|terminated with signal|exited with signal).*sigkill|"
      r"sigkill.*(received|killed)", 6),
    # Slurm / Kubernetes / docker wording for the same kill
    R("worker_killed", "oom_kill event", weight=7),
    R("worker_killed", "out-of-memory handler", weight=7),
    R("worker_killed", "oomkilled", weight=6),
    R("worker_killed", "code 137", r"(exit|return) code 137\b", 5),  # 128 + SIGKILL, as shells/docker report it
    R("worker_killed", "status 137", r"exit status 137\b", 5),
    R("worker_killed", "exitcode: 137", r"exitcode: 137\b", 5),
    R("worker_killed", "killed process", r"out of memory: killed process|oom-kill", 8),
    R("worker_killed", "is killed by signal: killed", weight=7),
    # torch.distributed.launch (torch <= 1.8) re-raises a dead rank as CPython's subprocess.CalledProcessError:
    # "Command '[...]' died with <Signals.SIGSEGV: 11>." (subprocess.py, CalledProcessError.__str__)
    R("worker_killed", "died with <signals.", r"died with <signals\.sig(segv|kill|bus|abrt|ill|fpe)\b", 6),
    R("worker_killed", "remote worker crashing", weight=3),
    R("worker_killed", "killed", r"^[\s`'\"]*killed[\s`'\".]*$", 5),  # a shell's report of a SIGKILLed child
    # torchrun ending the other ranks after one failed: a failure it did not explain (no traceback) is mostly a kill
    R("worker_killed", "closing signal sigterm", weight=2, alone=True),
    R("worker_killed", "connection closed by peer", r"gloo|pair\.cc", 2.5),
    # gloo's "Read error [addr]:port: Connection reset by peer": the peer process went away (it died or was killed)
    R("worker_killed", "connection reset by peer", r"gloo|pair\.cc", 2.5),
    R("worker_killed", "exitcode", r"exitcode\s*:?\s*(?!-?0\b|-15\b|1\b)-?\d+", 1.5),  # not 0, 1 or SIGTERM (-15)
    # a rank that aborted while Python shut down (no destroy_process_group): found by real runs, not in the corpus
    R("exit_without_destroy", "terminate called without an active exception", weight=4),
    # version mismatch
    R("version_mismatch", "undefined symbol", r"undefined symbol: *nccl|undefined symbol", 7),
    R("version_mismatch", "no kernel image is available", weight=8),
    # torch says these in a UserWarning ("CUDA initialization: The NVIDIA driver on your system is too old", "... with
    # CUDA capability sm_120 is not compatible with the current PyTorch installation"): the job then fails elsewhere
    R("version_mismatch", "driver version is insufficient", weight=8, in_warnings=True),
    R("version_mismatch", "is not compatible with the current pytorch installation", weight=7, in_warnings=True),
    R("version_mismatch", "nvidia driver on your system is too old", weight=8, in_warnings=True),
    R("version_mismatch", "version mismatch", r"nccl|cuda|driver", 5),
    R("version_mismatch", "mismatches the version that was used to compile", weight=7),
    R("version_mismatch", "unsupported toolchain", r"ptx", 7),
    # CUDA errors that mean "this build has no kernels for this GPU" (architecture newer than the build)
    R("version_mismatch", "named symbol not found", weight=8),
    R("version_mismatch", "invalid device function", weight=7),
    R("version_mismatch", "no device function", r"^(\S+ )?no device function\s*$", 6),  # NCCL built without this GPU's arch
    R("version_mismatch", "is not compatible with the current pytorch", weight=7),
    # --- from the training split's misses (tests/data/corpus_test.jsonl is never read for these) ---
    # rendezvous: the store or the peers never reached at start-up, or the launcher could not reach a node
    R("rendezvous_timeout", "connect() timed out", weight=6),
    R("rendezvous_timeout", "connect timeout", r"pair\.cc|gloo", 5),
    R("rendezvous_timeout", "ssh: connect to host", r"refused|timed out|no route", 5),
    # deepspeed/launcher/runner.py: the first host of the hostfile must answer a passwordless ssh
    R("rendezvous_timeout", "was not reachable via ssh", weight=5),
    R("rendezvous_timeout", "passwordauthentication=no", r"returned non-zero exit status 255", 5),
    R("rendezvous_timeout", "unable to reliably start one or more daemons", weight=5),
    R("rendezvous_timeout", "unable to complete a tcp connection", weight=4),
    R("rendezvous_timeout", "runtimeerror: connection timed out", weight=3),
    R("rendezvous_timeout", "expected, but not set", r"master_addr|master_port|world_size|rank", 7),
    R("rendezvous_timeout", "name or service not known", weight=4),
    R("rendezvous_timeout", "is setting up nccl communicator and retrieving nccluniqueid", weight=5),
    # collective mismatch: the ranks' models or calls differ
    R("collective_mismatch", "appears not to match sizes of the same param in process", weight=8),
    R("collective_mismatch", "ddp expects same model across all ranks", weight=8),
    R("collective_mismatch", "_verify_param_shape_across_processes", weight=3),  # a frame: any error in DDP's first check passes it
    R("collective_mismatch", "mismatched allreduce", weight=7),
    R("collective_mismatch", "mismatched", r"mismatched (allreduce|allgather|broadcast|alltoall)", 6),
    R("collective_mismatch", "op.preamble.length <= op.nbytes", weight=7),
    R("collective_mismatch", "inputs, expected group.size()", weight=6),
    # fairseq's all_gather_list: "Unable to unpickle data from other workers ... the workers have fallen out of sync"
    R("collective_mismatch", "unable to unpickle data from other workers", weight=6),
    R("collective_mismatch", "fallen out of sync", weight=4),
    R("collective_mismatch", "must match number of collective participants", weight=6),  # scatter/gather list length
    R("collective_mismatch", "gather got an input of invalid size", weight=6),  # DataParallel: a short last batch
    # an environment whose torch is older than the code (ModuleNotFoundError: No module named
    # 'torch.distributed.checkpoint.format_utils'), or a library missing from it (ldd: "libnccl.so.1 => not found")
    R("version_mismatch", "no module named 'torch.distributed", weight=5),
    R("version_mismatch", "=> not found", r"\blib(nccl|cudart|cuda|cublas|cudnn|torch\w*|c10\w*)[\w.]*\s+=> not found", 5),
    R("collective_mismatch", "must be equal to world_size times input tensor size", weight=6),  # all_gather_into_tensor
    # a rank (or the job) killed from outside, or crashed
    R("worker_killed", "exited on signal 9", weight=7),
    R("worker_killed", "is killed by signal: segmentation fault", weight=5),
    R("worker_killed", "is killed by signal: terminated", weight=5),
    R("worker_killed", "unexpected segmentation fault encountered in worker", weight=6),
    R("worker_killed", "forcefully exiting via signals.sigkill", weight=2),  # often the agent ending hung ranks
    R("worker_killed", "death signal, shutting down workers", weight=5),
    # DeepSpeed's launcher kills the other ranks after any rank failed: a kill only when nothing else explains it
    R("worker_killed", "sigkill_handler", r"killing subprocess", 4, alone=True),
    R("worker_killed", "*** error in `", weight=4),
    R("worker_killed", "horovod has been shut down", weight=3),
    # network interface / address
    R("network_interface", "connection refused", r"connect \[127\.0\.1\.1\]", 6),
    # gloo's full mesh at init: a peer's advertised address:port refused the connection (a loopback address there:
    # the peer's hostname resolves to 127.x, so it advertised an address no other host can reach)
    R("network_interface", "connection refused", r"pair\.cc:\d+\] connect \[127\.(?!0\.1\.1\])[\d.]+\]:\d+: connection refused", 4),
    R("rendezvous_timeout", "connection refused", r"pair\.cc:\d+\] connect \[(?!127\.)[^\]]+\]:\d+: connection refused", 3),
    R("network_interface", "no interface found in the same subnet", weight=7),
    # a host reached at the loopback alias Debian/Ubuntu map the hostname to, or NCCL bootstrapping to loopback
    # (a peer on another host cannot be there): "Retry to connect to 127.0.1.1:63917", "socketStartConnect: Connect
    # to 127.0.0.1<45069> failed"
    R("network_interface", "127.0.1.1", r"connect(?:ing|ed)? to 127\.0\.1\.1\b|\brefused\b", 6),
    R("network_interface", "connect to 127.", r"socketstartconnect: connect to 127\.[\d.]+<\d+> failed", 5),
    # ...or to a docker bridge's gateway (172.17.0.1, 172.18.0.1: the host's side of a bridge, advertised by a peer
    # that picked the bridge's interface) or a link-local address: "Connect to 172.18.0.1<49273> failed"
    R("network_interface", "connect to", r"\bconnect to (172\.(1[7-9]|2\d|3[01])\.0\.1|169\.254\.\d+\.\d+)<\d+> failed", 6),
    # launchers that could not find the host among its interfaces, or peers seen from another address (NAT, a
    # container network): Paddle's "Can't find your local ip {127.0.0.1}", Horovod's NoValidAddressesFound and
    # "declared addresses ... but has connected from a different address", Open MPI's btl "Match incoming
    # connection ... with locally known IP ... failed"
    R("network_interface", "find your local ip", weight=7),
    # Paddle's TCP store client while nobody listens at the address it was given (INFO lines, repeated)
    R("rendezvous_timeout", "while the server is not yet listening", r"retry to connect to", 3),
    R("network_interface", "novalidaddressesfound", weight=7),
    R("network_interface", "has connected from a different address", weight=7),
    R("network_interface", "match incoming connection from", r"locally known ip .*failed", 6),
    # gloo pairing an IPv4 with an IPv6 address (a host resolving to both): "ss1.ss_family == ss2.ss_family. 2 vs 10"
    R("network_interface", "ss_family", r"ss1\.ss_family == ss2\.ss_family", 7),
    # binding an address no interface of this host has (EADDRNOTAVAIL): "Failed bind on 10.x.x.x:3026 ,errno=99"
    R("network_interface", "errno=99", r"bind", 6),
    R("network_interface", "call to bind failed : cannot assign requested address", weight=5),
    R("network_interface", "btl_tcp_endpoint", r"connect\(\) to \S+ failed", 5),
    R("network_interface", "no route to host", r"^(?!.*\bnccl info\b)", 4),  # NCCL INFO retries are chatter
    R("network_interface", "network is unreachable", r"fe80::", 6),
    # a peer reached at a link-local address (IPv4 169.254/16, IPv6 fe80::): valid on one link only, so another host
    # cannot answer there (SageMaker, Kubernetes node-local and docker interfaces; ultralytics/yolov5#12811)
    R("network_interface", "connect to", r"connect to \[?(169\.254\.|fe80:)[^ ]* ?.*fail", 7),
    # TransformerEngine's userbuffers look NCCL_SOCKET_IFNAME up as one literal interface (NVIDIA/TransformerEngine#1170)
    R("network_interface", "invalid network interface", weight=6),
    # a torch built without distributed support (USE_DISTRIBUTED=0: macOS and some source builds; pytorch#90895)
    R("version_mismatch", "no module named 'torch._c._distributed", weight=6),
    # NCCL handed a result code the caller's headers do not know: the library loaded is not the one it was built
    # against (NVIDIA/TensorRT-LLM#1131)
    R("version_mismatch", "unknown result code", r"nccl", 4),
    # libfabric's EFA provider reporting a failed RDMA transfer (aws/aws-ofi-nccl#346)
    R("infiniband", "_handle_error()", r"efa", 5),
    # NCCL internal errors and invalid usage (topology, arguments)
    R("nccl_internal_or_invalid_usage", "does not loop back to start", weight=7),
    R("nccl_internal_or_invalid_usage", "could not find cpu close to gpu", weight=5),
    R("nccl_internal_or_invalid_usage", "nccl warn attribute", r"not found", 4),
    R("nccl_internal_or_invalid_usage", "argcheck", r"nccl warn.*invalid", 6),
    R("nccl_internal_or_invalid_usage", "has already been destroyed", r"nccl warn", 5),
    # collective timeouts in other wordings
    R("collective_timeout", "waiting for remainder of ranks for more than", weight=5),
    R("collective_timeout", "stalled ranks:", weight=5),
    R("collective_timeout", "timeout at nccl work", weight=7),
    # versions, builds, libraries
    R("version_mismatch", "error while loading shared libraries", r"libnccl|libcudart|libcuda|libtorch", 7),
    R("version_mismatch", "backend is not available", r"nccl|gloo|mpi", 6),
    R("version_mismatch", "versionmismatcherror", weight=7),
    R("version_mismatch", "illegal instruction", r"signal 4|sigill|illegal instruction", 5),
    # InfiniBand
    R("infiniband", "failed to get ib devices list", weight=6),
    # libibverbs probing its provider drivers warns for each one missing: harmless alone (NVIDIA/nccl#1044); a
    # provider that needs another libibverbs ("version `IBVERBS_PRIVATE_22' not found") is the verbs stack broken
    R("infiniband", "couldn't load driver", r"libibverbs|rdmav", 5, context=True),
    R("infiniband", "couldn't load driver", r"version \S+ not found|ibverbs_private", 5),
    # NCCL system errors (sockets, the OS)
    R("nccl_system_error", "connection reset by peer", r"nccl warn call to (write|recv|send) failed|warn call to recv", 5),
    # "... of /sys/class/pci_bus/...": NCCL's topology failed; "... of /sys/class/net/eth0/device" is a virtual NIC (INFO)
    R("nccl_system_error", "could not find real path of", r"/sys/class/(?!net/)", 6),
    # NCCL and CUDA
    R("nccl_unhandled_cuda_error", "failed to open cuda ipc handle", weight=6),
    R("nccl_unhandled_cuda_error", "peer access is not supported", weight=5),
    R("nccl_unhandled_cuda_error", "failed to find cuda library", weight=5),
    R("checkpoint_corrupt", "storage has wrong size: expected", weight=7),
    # DDP's reducer, when ranks' graphs differ: Lightning's wording of "Expected to have finished reduction", and
    # static_graph's check
    R("collective_mismatch", "parameters that were not used in producing the loss", weight=6),
    R("collective_mismatch", "training graph has changed in this iteration", weight=6),
    # SHARP (in-network reduction on InfiniBand switches) could not set up its aggregation tree
    R("infiniband", "streaming tree lock failed", weight=6),
    R("infiniband", "failed to lock sat tree", weight=6),
    # an IB work completion with a vendor error code ("work request complete err: status 5 and vendor err 249")
    R("infiniband", "vendor err", r"(status|complet\w*).*vendor err \d+", 6),
    # NCCL_GRAPH_FILE / NCCL_TOPO_FILE describing devices this machine does not have
    R("nccl_internal_or_invalid_usage", "xml import channel", r"not found", 5),
    # DeepSpeed loading a checkpoint directory without its mp_rank_*_model_states.pt: an empty list of shards fails
    # in its loader ("assert len(self.ckpt_list) > 0"); a traceback through the loader is that crash
    R("checkpoint_corrupt", "get_sd_loader(ckpt_list", weight=4),
    R("checkpoint_corrupt", "assert len(self.ckpt_list) > 0", weight=6),
    # a traceback through init's rendezvous (env://, tcp://, c10d store) that ends in an error no other rule names
    R("rendezvous_timeout", "rendezvous_iterator", weight=2.5),
    R("rendezvous_timeout", "_create_c10d_store", weight=2.5),
    R("rendezvous_timeout", "c10d_rendezvous_backend", r"c10d_rendezvous_backend\.py", 2.5),  # a frame, not its logger
    R("rendezvous_timeout", "tasks to start", r"timed out|time_out", 5),   # horovodrun: hosts never registered
    R("rendezvous_timeout", "http_store", r"ioexception|timeout|timed out", 4),  # horovod's gloo rendezvous
    # NCCL's shared-memory transport faulting on a too small /dev/shm (SIGBUS inside NCCL's threads)
    R("nccl_system_error", "caught signal 7", r"bus error", 4),
    R("nccl_system_error", "ncclshmopen", weight=5),
    R("nccl_system_error", "shmrecvsetup", weight=4),
    R("nccl_system_error", "shmsendsetup", weight=4),
    R("collective_mismatch", "are different across gpus", weight=6),  # mmcv: ranks logged different losses
    R("version_mismatch", "does not match the version torch was compiled", r"exception|error|unable", 7),
    R("network_interface", "unable to find interface for", weight=7),  # gloo: the address matches no interface
    # NCCL's socket connect gave up: the last of its retries ("retrying (34/34)") to an unreachable peer
    R("network_interface", "no route to host", r"retrying \((\d+)/\1\)", 5),
    R("infiniband", "net/ofi", r"error|fail", 5),  # the AWS OFI (EFA) network plugin
    # --- from the libraries' own source, not from any corpus: torch 2.13 (its python and libtorch_cpu's strings),
    #     gloo, NCCL (newest commit, tags back to 2.10); each needle as the code prints it, where in the comment
    # torch/distributed/elastic/utils/distributed.py:123
    R('rendezvous_timeout', 'members to join', r'timed out waiting for all \d+ members to join', 7),
    # torch/distributed/elastic/rendezvous/etcd_rendezvous.py:318
    R('rendezvous_timeout', 'rendezvous timeout occurred in etcdrendezvoushandler', weight=6),
    # torch/distributed/elastic/rendezvous/etcd_server.py:243
    R('rendezvous_timeout', 'timed out waiting for etcd server to be ready', weight=5),
    # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:446
    R('rendezvous_timeout', 'rendezvousstateerror', weight=4),
    # torch/csrc/distributed/c10d/socket.cpp,
    R('rendezvous_timeout', 'distnetworkerror', r'distnetworkerror(?!.*(got|sent) 0 bytes)', 3),
    # torch/csrc/distributed/c10d/FileStore.cpp (libtorch_cpu.so)
    R('rendezvous_timeout', 'timeout waiting for key:', r'timeout waiting for key: \S+ after \d+ ms', 5),
    # torch/csrc/distributed/c10d/socket.cpp (libtorch_cpu.so)
    R('rendezvous_timeout', 'waitforinput: socket', r'waitforinput: socket .* timed out after \d+ ?ms', 3),
    # torch/csrc/distributed/c10d/socket.cpp
    R('rendezvous_timeout', 'has timed out, will retry', r'the server socket on .* has timed out, will retry', 3),
    # torch/csrc/distributed/c10d/socket.cpp
    R('rendezvous_timeout', 'temporary failure in name resolution', r'gai error|c10d|socket\.cpp|nccl|host not found', 4),
    # torch/csrc/distributed/c10d/TCPStore.cpp (libtorch_cpu.so)
    R('rendezvous_timeout', 'response is expected', r'(stop_waiting|wait_canceled) response is expected', 4),
    R('rendezvous_timeout', 'invalid nccl_comm_id', weight=5),  # nccl/src/bootstrap.cc:114
    # torch/distributed/elastic/utils/distributed.py:111
    R('port_in_use', 'already in use', r'port:? \d+ already in use(?!, attempt)', 7),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    R('collective_timeout', 'heartbeat monitor timed out', weight=6),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    R('collective_timeout', 'received a dump signal due to a collective timeout', weight=5),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    R('collective_timeout', 'observed flight recorder dump signal from another rank', weight=4),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    R('collective_timeout', 'terminating the process after attempting to dump debug info', r'due to (collective timeout|processgroupnccl watchdog hang)', 4),
    R('collective_timeout', 'timed out in blocking wait', weight=6),  # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp (libtorch_cpu.so)
    R('collective_timeout', 'timed out in monitoredbarrier after', weight=6),
    # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp
    R('collective_timeout', 'successfully reached monitoredbarrier, but received errors', weight=4),
    R('collective_timeout', 'application timeout caused pair closure', weight=6),  # torch/gloo
    # torch/gloo
    R('collective_timeout', 'read timeout', r'(gloo|pair\.cc|buffer\.cc).*read timeout|read timeout \[', 4),
    # torch/gloo
    R('collective_timeout', 'write timeout', r'(gloo|pair\.cc|buffer\.cc).*write timeout|write timeout \[', 4),
    # torch/csrc/distributed/c10d/Work.cpp (libtorch_cpu.so)
    R('collective_timeout', 'operation timed out!', r'(runtimeerror|distbackenderror|work\.cpp|c10d).*operation timed out!', 4),
    R('collective_timeout', 'timeout at collective:', weight=5),  # torch/csrc/distributed/c10d/TraceUtils.h
    # torch/csrc/distributed/c10d/TraceUtils.h
    R('collective_timeout', 'are the lagging ranks that caused this timeout', weight=5),
    # torch/csrc/distributed/c10d/TraceUtils.h
    R('collective_timeout', 'lagging/dead/mismatched ranks that caused the desync', weight=4),
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    R('collective_timeout', 'could not acquire gil within 300 ms on exit', weight=3),
    R('collective_mismatch', 'message truncated : received', r'bootstrap|nccl warn', 4),  # nccl/src/bootstrap.cc:224
    R('network_interface', 'net/socket : no interface found', weight=6),  # nccl/src/transport/net_socket.cc:61
    R('network_interface', 'verify nccl_oob_net_ifname', weight=7),  # nccl/src/bootstrap.cc:577
    R('nccl_system_error', 'exceeded retries', r'socket(start|poll)connect: exceeded retries', 5),  # nccl/v2.21.5-1
    R('nccl_system_error', 'exceeded timeouts', r'socket(start|poll)connect: exceeded timeouts', 5),  # nccl/v2.21.5-1
    # nccl/src/os/linux.cc:288
    R('nccl_system_error', 'exceeded error retry count', r'connect to .* returned .*exceeded error retry count|accept.*exceeded error retry count', 5),
    R('nccl_system_error', 'call to recv from', r'call to recv from .* failed', 5),  # nccl/v2.21.5-1
    R('nccl_system_error', 'call to send to', r'call to send to .* failed', 5),  # nccl/src/os/linux.cc:362
    R('nccl_system_error', 'poll() failed with error', r'socketpollconnect', 4),  # nccl/v2.21.5-1
    # nccl/v2.21.5-1
    R('nccl_system_error', 'accept failed:', r'(sockettryaccept|ncclossockettryaccept): accept failed', 5),
    R('nccl_system_error', 'socket creation failed', r'nccl|net :', 5),  # nccl/v2.21.5-1
    # nccl/src/proxy.cc:1861
    R('nccl_system_error', 'error encountered progressing operation', r'res=2\b', 4),  # res: the ncclResult (2 system)
    R('nccl_system_error', 'failed to initialize any net plugin', weight=5),  # nccl/src/plugin/net.cc:349
    R('nccl_internal_or_invalid_usage', 'multiple ranks are using the same gpu', weight=8),  # nccl/src/init.cc:1057
    R('nccl_internal_or_invalid_usage', 'has already checked in', r'bootstrap root', 5),  # nccl/src/bootstrap.cc:348
    R('nccl_internal_or_invalid_usage', 'mismatch in rank count from procs', weight=5),  # nccl/v2.21.5-1
    R('version_mismatch', 'mismatched nccl version detected', weight=8),  # nccl/src/init.cc:1043
    R('version_mismatch', 'nccl library is too old', weight=8),  # nccl/src/dev_runtime.cc:1428
    R('version_mismatch', 'nccl library is not backwards compatible', weight=8),  # nccl/src/dev_runtime.cc:1444
    R('version_mismatch', 'compiled with too old version of nccl', weight=7),  # nccl/src/devcomm/devcomm_v22902.cc:109
    R('version_mismatch', 'failed to load cuda missing symbol', weight=6),  # nccl/v2.18.3-1
    # torch/distributed/distributed_c10d.py:2181
    R('version_mismatch', "distributed package doesn't have nccl built in", weight=6),
    # the same for MPI or UCC, and as people retype it ("doesn't have NCCL bulit in")
    R('version_mismatch', "distributed package doesn't have", r"doesn't have (nccl|mpi|ucc|gloo) bu\w*t in", 6),
    R('version_mismatch', "nccl support is not compiled", weight=4, in_warnings=True),
    # builds without a backend, as launchers and torch word it: Horovod's "Neither MPI nor Gloo support has been
    # built", init_process_group(backend='mpi') on a torch without MPI ("Unknown c10d backend type MPI"), vLLM's
    # NCCL wrapper that found no usable libnccl ("name 'ncclGetVersion' is not defined")
    R('version_mismatch', "neither mpi nor gloo support has been built", weight=7),
    R('version_mismatch', "unknown c10d backend type", r"unknown c10d backend type (mpi|nccl|ucc|gloo|xccl)\b", 5),
    R('version_mismatch', "is not defined", r"name '_?nccl\w+' is not defined", 5),
    # DDP's reducer changed in torch 1.7 under mmcv's MMDistributedDataParallel (pytorch/pytorch#47050)
    R('version_mismatch', "rebuilt_param_indices_.size()", weight=6),
    # torch/csrc/distributed/c10d/TCPStore.cpp (libtorch_cpu.so)
    R('version_mismatch', 'use_libuv was requested but pytorch was buil', weight=6),
    R('version_mismatch', 'does not include kernels for this gpu', weight=7),  # torch/cuda/__init__.py:390
    R('version_mismatch', 'no published pytorch cuda builds for release', weight=7),  # torch/cuda/__init__.py:400
    # torch/cuda/__init__.py:428
    R('version_mismatch', 'the current pytorch install supports cuda capabilities', weight=6),
    R('version_mismatch', 'torch not compiled with cuda enabled', weight=5),  # torch/cuda/__init__.py:522
    R('version_mismatch', 'libcudart functions unavailable', weight=5),  # torch/cuda/__init__.py:525
    # cudaErrorSystemDriverMismatch
    R('version_mismatch', 'unsupported display driver / cuda driver combination', weight=8, in_warnings=True),
    # torch/csrc/cuda
    R('version_mismatch', 'forward compatibility was attempted on non supported hw', weight=7, in_warnings=True),
    R('version_mismatch', 'cuda driver is a stub library', weight=6, in_warnings=True),  # cudaErrorStubLibrary
    R('version_mismatch', 'device kernel image is invalid', weight=6),  # cudaErrorInvalidKernelImage
    R('version_mismatch', 'ptx jit compiler library not found', weight=5),  # cudaErrorJitCompilerNotFound
    # torch/__init__.py
    # (not NCCL probing for its optional net plugin, nor its own "Failed to find CUDA library" WARN, named above)
    R('version_mismatch', 'cannot open shared object file',
      r'^(?!.*(nccl info|libnccl-net|failed to find cuda library))'
      r'.*lib(nccl|cuda|cudart|cudnn|cublas|cublaslt|nvrtc|nvjitlink|cusparse|cufft|curand|torch|c10|nvidia-ml)\S*\.so', 6),
    R('version_mismatch', 'not found (required by', r"^(?!.*libibverbs: warning).*version `[^']+' not found \(required by", 6),  # dynamic
    # torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp
    R('version_mismatch', 'processgroupnccl is only supported with gpus, no gpus found', weight=3),
    R('oom_in_collective', 'failed to cuda host alloc', weight=5),  # nccl/src/include/alloc.h:159
    # nccl/src/include/alloc.h:178
    R('oom_in_collective', 'failed to malloc', r'nccl warn failed to malloc \d+ bytes', 4),
    R('oom_in_collective', 'unrecoverable error detected: malloc', weight=5),  # nccl/src/misc/utils.cc:318
    # torch/gloo (libtorch_cpu.so)
    R('rendezvous_timeout', 'failed to connect, willretry=0', r'remote=\[(?!127\.|::1\]|::ffff:127\.)', 5),
    R('network_interface', 'failed to connect, willretry=0', r'remote=\[(127\.|::1\]|::ffff:127\.)', 6),  # torch/gloo
    # torch/distributed/rendezvous.py:218
    R('rendezvous_timeout', 'error initializing torch.distributed using', weight=6),
    R('rendezvous_timeout', 'no rendezvous handler for', weight=5),  # torch/distributed/rendezvous.py:100
    # nccl/src/bootstrap.cc:335
    R('nccl_internal_or_invalid_usage', 'mismatch in info from procs', r'bootstrap root', 5),
    # second batch from the source: NCCL's IB transport, aws-ofi-nccl, torch's serialization, DataLoader and libshm,
    # the DDP reducer, FSDP, the CUDA libraries' allocation failures, gloo's device code, the elastic agent
    # nccl/src/transport/net_ib/common.cc:32
    R('infiniband', 'communicator encountered a fatal error', r'detected in ncclib\w*', 7),
    # nccl/src/transport/net_ib/p2p_resiliency.cc:64
    R('infiniband', 'the error is fatal (', r'net/ib.*the error is fatal \(.*cannot continue', 6),
    R('infiniband', 'attempted to connect incompatible devices', weight=6),  # nccl/src/transport/net_ib/connect.cc:987
    R('infiniband', 'device is incompatible with the local', r'net/ib', 6),  # nccl/src/transport/net_ib/connect.cc:1034
    R('infiniband', 'ooo rq is force enabled but', weight=5),  # nccl/src/transport/net_ib/connect.cc:670
    R('infiniband', 'nccl_ib_subnet_prefix_len=', r'out of range', 5),  # nccl/src/transport/net_ib/connect.cc:529
    R('infiniband', 'unable to use gin: peermem is not supported', weight=5),  # nccl/src/transport/net_ib/gin.cc:42
    # aws-ofi-nccl/src/nccl_ofi_rdma.cpp:1996
    R('infiniband', 'unable to insert remote address into address vector', r'net/ofi', 5),
    # aws-ofi-nccl/src/nccl_ofi_ofiutils.cpp:359
    R('infiniband', "gdr support reported to nccl but then couldn't be configured", weight=6),
    # aws-ofi-nccl/src/nccl_ofi_rdma.cpp:7328
    R('infiniband', 'provider does not support 4 bytes of immediate data', weight=5),
    # aws-ofi-nccl/src/nccl_ofi_net.cpp:651
    R('version_mismatch', 'efa provider requires at least libfabric version', weight=6),
    R('checkpoint_corrupt', 'invalid magic number; corrupt file?', weight=7),  # torch/serialization.py:1888
    # torch/serialization.py:1891
    R('checkpoint_corrupt', 'invalid protocol version:', r'invalid protocol version: -?\d+', 4),
    R('checkpoint_corrupt', 'archive does not contain any files', weight=6),  # caffe2/serialize/inline_container.cc
    # caffe2/serialize/inline_container.cc
    R('checkpoint_corrupt', 'file in archive is not in a subdirectory', weight=5),
    # caffe2/serialize/inline_container.cc
    R('checkpoint_corrupt', 'mismatch with read size', r'record size \d+ mismatch with read size \d+', 6),
    # zipfile
    R('checkpoint_corrupt', 'badzipfile', r'badzipfile:\s*(file is not a zip file|bad magic number|bad crc-32|truncated|corrupt)', 5),
    R('checkpoint_corrupt', 'truncated file: eof =', weight=7),  # h5py)
    # torch/utils/data/dataloader.py:1327
    R('dataloader_shm', 'communication with the workers is no longer possible', weight=6),
    R('dataloader_shm', 'received 0 items of ancdata', weight=6),  # CPython
    R('dataloader_shm', 'unable to resize file <', r'</torch_|/dev/shm', 6),  # torch/lib/libtorch_cpu.so)
    R('dataloader_shm', 'no response from torch_shm_manager', weight=5),  # torch/lib/libshm/core.cpp
    R('dataloader_shm', 'shared memory manager connection has timed out', weight=5),  # torch/lib/libshm/socket.h
    # torch/distributed/elastic/multiprocessing/errors/__init__.py:142
    R('dataloader_shm', 'received by pid', r'signal 7 \(sigbus\) received by pid', 3),
    R('collective_timeout', 'deepep', r'deepep .*\btimeout\b', 4),  # deepseek-ai/DeepEP: "DeepEP dispatch NVL receiver timeout"
    R('dataloader_shm', 'exits with return', r'exits with return (code\s*=\s*)?-7\b', 3),  # DeepSpeed's launcher: SIGBUS
    # aten/src/ATen/cuda/CublasHandlePool.cpp
    R('oom_in_collective', '_status_alloc_failed', r'(cublas|cusparse|cusolver|cudnn)_status_alloc_failed', 7),
    R('oom_in_collective', 'cufft_alloc_failed', weight=6),  # aten/src/ATen/native/cuda/CuFFTUtils.h
    R('oom_in_collective', 'hip out of memory', weight=8),  # c10/cuda/CUDACachingAllocator.cpp
    R('oom_in_collective', 'driver error: out of memory', weight=7),  # c10/cuda/driver_api.h
    R('oom_in_collective', 'cuda_error_out_of_memory', weight=7),  # CUDA
    R('oom_in_collective', '_result_error_out_of_device_memory', weight=7),  # Level Zero / UR (Intel XPU, oneCCL)
    R('oom_in_collective', 'nvml_success == r internal assert failed', weight=5),  # c10/cuda/CUDACachingAllocator.cpp
    # torch/csrc/distributed/c10d/ProcessGroupGloo.cpp
    R('network_interface', 'to a (local) address', r'cannot resolve \S+ to a \(local\) address', 7),
    R('network_interface', 'net : unsupported ip family', weight=4),  # nccl/src/misc/socket.cc:276
    R('rendezvous_timeout', 'error encountered when getting address info', weight=5),  # nccl/src/misc/socket.cc:257
    R('rendezvous_timeout', 'no valid <ipv4_or_hostname>:<port> pair found', weight=5),  # nccl/src/misc/socket.cc:246
    # torch/csrc/distributed/c10d/reducer.cpp
    R('collective_mismatch', 'expected to have finished reduction in the prior iteration', weight=7),
    R('collective_mismatch', 'you can enable unused parameter detection by', weight=6),  # the same error's advice
    # torch/csrc/distributed/c10d/reducer.cpp
    R('collective_mismatch', 'did not receive grad for rank', r'(parameter indices|parameters) which did not receive grad for rank \d+', 6),
    R('collective_mismatch', 'has been marked as ready twice', weight=5),  # torch/csrc/distributed/c10d/reducer.cpp
    # torch/csrc/distributed/c10d/reducer.cpp
    R('collective_mismatch', 'expected to mark a variable ready only once', weight=5),
    # torch/distributed/fsdp/_exec_order_utils.py:191
    R('collective_mismatch', 'forward order differs across ranks', weight=7),
    # torch/distributed/tensor/_collective_utils.py:299
    R('collective_mismatch', 'inconsistent tensor metadata (including shape and stride) across ranks', weight=7),
    R('collective_mismatch', 'op.preamble.roffset + op.preamble.length <= op.buf->size_', weight=7),  # torch/gloo
    # torch/distributed/elastic/multiprocessing/errors/__init__.py:142
    R('worker_killed', 'received by pid', r'signal 11 \(sigsegv\) received by pid', 5),
    # torch/multiprocessing/spawn.py:193
    R('worker_killed', 'terminated with signal', r'process \d+ terminated with signal (sigsegv|sigbus)', 5),
    R('worker_killed', 'got termination signal:', weight=4),  # torch/distributed/elastic/agent/server/api.py:1005
    # torch/distributed/elastic/multiprocessing/api.py:86
    R('worker_killed', 'signalexception', r'process \d+ got signal: (1|9|15)\b', 4),
    # --- launch mistakes and crashes as the frameworks' stacks print them (2026-12-07), from the libraries' source ---
    # CUDA's cudaErrorInvalidDevice (101; 10 before CUDA 10.1) as torch.cuda.set_device / torch.device raise it, and
    # torch's older THCudaCheck form: a device index past the visible GPUs
    # (NCCL's own "Cuda failure 101 'invalid device ordinal'" inside a transport is NCCL's CUDA error, not this)
    R("too_many_ranks", "invalid device ordinal", r"cuda (runtime )?error( \(\d+\))? ?: invalid device ordinal", 8),
    # torch/multiprocessing/spawn.py ProcessContext.join: a child mp.spawn started died of a signal
    R("worker_killed", "terminated with signal", r"process \d+ terminated with signal sig(abrt|kill|fpe)\b", 5),
    # abseil's failure signal handler (absl/debugging/failure_signal_handler.cc), linked into jax, tensorflow, ray
    R("worker_killed", "received at time=", r"\*\*\* sig(segv|abrt|bus|fpe|ill) received at time=", 5),
    # CPython's faulthandler (Python/faulthandler.c) on a fatal signal ("Aborted" is left to the abort's own rules)
    # (alone: after "Fatal Python error: Aborted" faulthandler itself may crash; that is the abort's, not a kill)
    R("worker_killed", "fatal python error:", r"fatal python error: (segmentation fault|bus error|floating point exception)",
      4, alone=True),
    # --- a third batch from the libraries' source, not from any corpus: torch's store, elastic, desync report, DETAIL
    #     fingerprints, older releases' wordings (torch 1.x launcher and watchdog), CUDA/cuDNN error names, NCCL's shm, proxy
    #     and socket paths, rdma-core's completion status texts, miniz's archive errors; where each is printed
    # pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp (TCPStore::barrier)
    R('rendezvous_timeout', 'barrier timeout after', r'barrier timeout after \d+ ?ms, key:', 6),
    # pytorch/pytorch torch/csrc/distributed/c10d/socket.cpp (SocketConnectOp::tryConnect)
    R('rendezvous_timeout', 'network addresses of (', r'network addresses of \(.*\) cannot be retrieved \(gai error', 5),
    # torch/distributed/elastic/rendezvous/etcd_store.py:134
    R('rendezvous_timeout', 'timeout while waiting for keys in etcdstore', weight=5),
    # pytorch/pytorch torch/csrc/distributed/c10d/control_collectives/StoreCollectives.cpp
    R('rendezvous_timeout', 'failed -- missing ranks:', r'(barrier|gather|all_gather) failed -- missing ranks:', 4),
    # torch/distributed/elastic/rendezvous/etcd_rendezvous.py:485
    R('rendezvous_timeout', 'unexpected state of etcdrendezvoushandler', weight=4),
    # torch/distributed/elastic/rendezvous/dynamic_rendezvous.py:447
    R('rendezvous_timeout', 'the rendezvous state is corrupt', weight=4),
    # pytorch/pytorch torch/csrc/distributed/c10d/TCPStore.cpp (TCPStore::ping)
    R('port_in_use', 'ping failed, invalid value returned from server', weight=5),
    # pytorch/pytorch torch/lib/c10d/ProcessGroupNCCL.cpp (v1.8-v1.9 workCleanupLoop)
    R('collective_timeout', 'caught collective operation timeout', r'^(?!.*watchdog caught).*caught collective operation timeout', 6),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (WorkNCCL::synchronizeInternal, v1.10-v2.1)
    R('collective_timeout', 'timed out in call to wait()', weight=6),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (heartbeatMonitor, v2.3-v2.4)
    R('collective_timeout', 'received a global timeout from another rank', weight=5),
    # pytorch/pytorch torch/csrc/distributed/c10d/TraceUtils.h (analyzeLaggingRanks)
    R('collective_timeout', "joined but didn't finish collective", r"\] joined but didn't finish collective #\d+", 5),
    # pytorch/pytorch torch/csrc/distributed/c10d/TraceUtils.h (analyzeLaggingRanks)
    R('collective_timeout', "but didn't join collective", r"finished collective #\d+, but didn't join collective #\d+", 5),
    # pytorch/pytorch torch/csrc/distributed/c10d/TraceUtils.h (analyzeMissingRanks)
    R('collective_timeout', 'they never joined any collectives', weight=4),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (Watchdog::runLoop)
    R('collective_timeout', 'flight recorder dumps to finish', r'timed out after waiting for \d+ ?ms flight recorder dumps to finish', 3),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (Watchdog::runLoop)
    R('collective_timeout', 'stack trace of the failed collective not found', weight=3),
    # pytorch/gloo gloo/transport/ibverbs/buffer.cc:144
    R('collective_timeout', 'send timeout', r'(gloo|ibverbs|buffer\.cc).*send timeout|send timeout \[', 4),
    # pytorch/pytorch torch/csrc/distributed/c10d/reducer.cpp (verify_params_across_processes)
    R('collective_mismatch', 'appears not to match strides of the same param in process', weight=8),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (compute_collective_diff)
    R('collective_mismatch', 'collectives differ in the following aspects', weight=7),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (compute_collective_diff)
    R('collective_mismatch', 'op type: ', r'op type: \w+\s*vs\s*\w+', 6),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (compute_collective_diff)
    R('collective_mismatch', 'sequence number: ', r'sequence number: \d+\s*vs\s*\d+', 5),
    # pytorch/pytorch torch/csrc/distributed/c10d/ProcessGroupWrapper.cpp (compute_collective_diff)
    R('collective_mismatch', 'tensor dtypes: ', r'tensor dtypes: \S+\s*vs\s*\S+', 6),
    # torch/distributed/algorithms/join.py:349
    R('collective_mismatch', 'detected at least one rank that exhausted inputs', weight=5),
    # torch/distributed/fsdp/_exec_order_utils.py:300
    R('collective_mismatch', 'forward order differs from that of the first iteration', weight=4, in_warnings=True),
    # torch/distributed/fsdp/_exec_order_utils.py:264
    R('collective_mismatch', 'is all-gathering parameters for', r'rank \d+ is all-gathering parameters for .* while rank \d+ is all-gathering', 7),
    R('version_mismatch', 'cudnn version incompatibility', weight=8),  # torch/backends/cudnn/__init__.py:61
    # torch/backends/cudnn/__init__.py:97
    R('version_mismatch', 'is not compatible with devices with sm < 7.5', weight=7),
    # torch/cuda/__init__.py (_check_capability, torch <= 2.6: old_gpu_warn)
    R('version_mismatch', 'no longer supports this gpu because it is too old', weight=7, in_warnings=True),
    # torch/cuda/__init__.py (_check_capability, torch 1.x: incorrect_binary_warn)
    R('version_mismatch', 'which requires cuda_version >=', weight=7, in_warnings=True),
    # torch/cuda/__init__.py:373 (_warn_unsupported_code)
    R('version_mismatch', 'which is of compute capability (cc)', weight=6, in_warnings=True),
    # pytorch/vision torchvision/extension.py (_check_cuda_version)
    R('version_mismatch', 'were compiled with different cuda major versions', weight=8),
    # pytorch/vision torchvision/extension.py (_assert_has_ops)
    R('version_mismatch', "couldn't load custom c++ ops", weight=6),
    # pytorch/vision torchvision/_meta_registrations.py (registration against torch.library)
    R('version_mismatch', 'operator torchvision::nms does not exist', weight=6),
    R('version_mismatch', 'fp8 reduction support begins with sm90', weight=5),  # nccl/src/enqueue.cc:3029
    # nccl/src/misc/strongstream.cc:27 (v2.14)
    R('version_mismatch', 'installed cuda driver is older than the minimum version', weight=6),
    R('version_mismatch', 'nccl cannot be captured in a graph if either', weight=5),  # nccl/src/misc/strongstream.cc:91
    # pytorch/pytorch torch/csrc/jit/codegen/fuser/cuda/fused_kernel.cpp (NVRTC_CHECK)
    R('version_mismatch', 'invalid value for --gpu-architecture', weight=7),
    # pytorch/pytorch aten/src/ATen/cuda/CUDABlas.cpp (TORCH_CUDABLAS_CHECK)
    R('version_mismatch', 'cublas_status_arch_mismatch', weight=6),
    # pytorch/pytorch aten/src/ATen/cudnn/Exceptions.h (AT_CUDNN_CHECK)
    R('version_mismatch', 'cudnn_status_version_mismatch', weight=7),
    # pytorch/pytorch aten/src/ATen/cudnn/Exceptions.h (AT_CUDNN_CHECK)
    R('version_mismatch', 'cudnn_status_arch_mismatch', weight=6),
    # CUDA driver API error name (cuda.h) as printed by torch/triton
    R('version_mismatch', 'unsupported_ptx_version', r'cuda_error_unsupported_ptx_version|cudaerrorunsupportedptxversion', 7),
    # CUDA runtime error name (cuda_runtime_api.h) as printed by torch/NCCL
    R('version_mismatch', 'cudaerrorinsufficientdriver', weight=8),
    # CUDA driver API error name (cuda.h)
    R('version_mismatch', 'system_driver_mismatch', r'cuda_error_system_driver_mismatch|cudaerrorsystemdrivermismatch', 8),
    # CUDA driver API error name (cuda.h)
    R('version_mismatch', 'no_binary_for_gpu', r'cuda_error_no_binary_for_gpu|cudaerrornokernelimagefordevice', 7),
    # pytorch/gloo gloo/transport/ibverbs/pair.cc:626 (ibv_wc_status_str from rdma-core)
    R('infiniband', 'transport retry counter exceeded', weight=8),
    # pytorch/gloo gloo/transport/ibverbs/pair.cc:651 (ibv_wc_status_str)
    R('infiniband', 'rnr retry counter exceeded', weight=7),
    # rdma-core providers/mlx5/cq.c (mlx5_dump_error_cqe); nccl/src/transport/net_ib resiliency INFO
    R('infiniband', 'got completion with error', weight=6),
    # NCCL's error trace ("transport/net_ib.cc:282 -> 2", 2.19+: "transport/net_ib/connect.cc:...") starts in the IB
    # transport: the failure behind the ncclSystemError it reports is InfiniBand's (only next to an error: NCCL's IB
    # plugin failing to start without libibverbs, "net_ib.cc:852 -> 3", is its harmless fall-back to sockets)
    R('infiniband', 'transport/net_ib', r'transport/net_ib[\w/]*\.cc:\d+ -> \d+', 5, context=True, origin=True),
    # c10d's socket poll while it waits on the store (torch/csrc/distributed/c10d/socket.cpp)
    R('rendezvous_timeout', 'while waitforinput, poolfd failed', weight=3),
    # NVSwitch systems: nvidia-fabricmanager will not start when its version is not the driver's
    R('version_mismatch', "don't match with driver version", r'fabric ?manager|driver interface version', 7),
    R('version_mismatch', 'nv-fabricmanager', r'status=1/failure', 4),
    # a process aborted from ProcessGroupNCCL's watchdog thread (its native stack, SIGABRT): the watchdog found a
    # timeout or an NCCL error; an error's own line, when the log has it, outweighs this
    R('collective_timeout', 'processgroupnccl::ncclcommwatchdog', weight=3),
    R('collective_timeout', 'processgroupnccl::watchdog::run', weight=3),
    R('infiniband', 'call to ibv_poll_cq() returned', weight=5),  # nccl/src/include/ibvwrap.h:63
    R('infiniband', 'no ibverbs devices present', weight=5),  # pytorch/gloo gloo/transport/ibverbs/device.cc:84
    R('infiniband', 'ibv_reg_mr', r'ibv_reg_mr\w*: ', 5),  # pytorch/gloo gloo/transport/ibverbs/buffer.cc:58
    R('network_interface', 'address family mismatch', weight=5),  # pytorch/gloo gloo/transport/tcp/pair.cc:211
    # pytorch/pytorch torch/csrc/distributed/c10d/GlooDeviceFactory.cpp
    R('network_interface', "interface or hostname can't be empty", weight=5),
    # pytorch/pytorch torch/csrc/distributed/c10d/NCCLUtils.cpp (getNcclErrorDetailStr)
    R('nccl_system_error', 'system call (e.g. socket, malloc) or external library call failed', weight=4),
    # nccl/src/os/linux.cc:795 (older: src/misc/shmutils.cc)
    R('nccl_system_error', 'failed to extend', r'failed to extend \S+ to \d+ bytes', 6),
    R('nccl_system_error', 'failed to create shared memory file', weight=6),  # nccl/src/os/linux.cc:780
    R('nccl_system_error', 'error: could not map', r'could not map \S+ size \d+', 5),  # nccl/src/os/linux.cc:806
    # nccl/src/misc/socket.cc:533 (v2.19-v2.21)
    R('nccl_system_error', 'socketpollconnect: connect to', r'socketpollconnect: connect to \S+ returned \d+', 4),
    R('nccl_system_error', 'ncclossocketpollconnect to', r'failed with error', 4),  # nccl/src/os/linux.cc:328
    R('nccl_system_error', '[proxy service] poll failed', weight=4),  # nccl/src/proxy.cc:1059 (v2.14) / 1808
    R('nccl_system_error', 'could not receive type from localrank', r'res=2\b|closed=1', 3),  # nccl/src/proxy.cc:1874
    R('nccl_system_error', 'proxy call to rank', r'proxy call to rank \d+ failed', 3),  # nccl/src/proxy.cc:884 (v2.14)
    R('nccl_system_error', 'ncclproxycallblockinguds call to tprank', weight=3),  # nccl/src/proxy.cc:1275
    R('nccl_system_error', 'net/socket : socket progress error', weight=4),  # nccl/src/transport/net_socket.cc
    # pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (OutOfMemoryError message)
    R('oom_in_collective', 'tried to allocate', r'^(?!.*defaultcpuallocator).*tried to allocate [\d.]+ ?[kmgt]i?b\b', 6),
    # pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (torch 1.x-2.1 OOM message)
    R('oom_in_collective', 'reserved in total by pytorch', weight=6),
    # pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (torch >= 2.2 OOM message)
    R('oom_in_collective', 'has a total capacity of', r'gpu \d+ has a total capacity of [\d.]+ ?\w+ of which', 6),
    # pytorch/pytorch third_party/miniz (mz_zip_get_error_string) via caffe2/serialize/inline_container.cc
    R('checkpoint_corrupt', 'invalid header or archive is corrupted', weight=8),
    # pytorch/pytorch third_party/miniz via caffe2/serialize/inline_container.cc
    R('checkpoint_corrupt', 'decompression failed or archive is corrupted', weight=8),
    # pytorch/pytorch caffe2/serialize/inline_container.cc
    R('checkpoint_corrupt', 'high likelihood that your checkpoint file is corrupted', weight=8),
    # pytorch/pytorch third_party/miniz via caffe2/serialize/inline_container.cc
    R('checkpoint_corrupt', 'unsupported central directory size', weight=7),
    # torch/distributed/launch.py (torch 1.x, raise CalledProcessError on a child's return code)
    R('worker_killed', 'returned non-zero exit status -9', r'returned non-zero exit status -9\b', 7),
    # pytorch/pytorch torch/lib/c10d/FileStore.cpp / HashStore.cpp (torch 1.x Store::wait)
    R('rendezvous_timeout', 'wait timeout', r'(runtimeerror|diststoreerror|error): wait timeout\s*$', 5),
    # --- from the frameworks' own source (Horovod, DeepSpeed, accelerate, Megatron-LM, transformers, Ray, vLLM, sglang,
    #     Lightning): the messages they print themselves around a distributed failure; where each is printed
    # horovod/horovod horovod/common/controller.cc:514
    R('collective_mismatch', 'mismatched data types: one rank had type', weight=8),
    # horovod/horovod horovod/common/controller.cc:532
    R('collective_mismatch', 'mismatched operations: one rank did an', weight=8),
    # horovod/horovod horovod/common/controller.cc:565 (also :670, :683)
    R('collective_mismatch', 'but another rank sent a tensor', r'one rank sent a tensor (of shape|of rank|with dimension)', 7),
    # horovod/horovod horovod/common/controller.cc:592
    R('collective_mismatch', 'mismatched prescale and/or postscale factors', weight=7),
    # horovod/horovod horovod/common/controller.cc:615
    R('collective_mismatch', 'mismatched reduction operation:', weight=7),
    # horovod/horovod horovod/common/operations.cc:676
    R('collective_mismatch', 'different ranks tried to set up mismatching', weight=6),
    # horovod/horovod horovod/common/process_set.cc:58 (and :66 'mismatching values')
    R('collective_mismatch', 'mismatching size on different ranks', r'process set with mismatching (size|values) on different ranks', 6),
    # horovod/horovod horovod/common/process_set.cc:66
    R('collective_mismatch', 'mismatching values on different ranks', r'process set with mismatching (size|values) on different ranks', 6),
    # horovod/horovod horovod/common/stall_inspector.cc:103
    R('collective_timeout', 'is stalled for longer than', r'rank \(marked by \"!\"\) is stalled for longer than \d+ seconds', 6),
    # horovod/horovod horovod/common/exceptions.py:36
    R('version_mismatch', 'installed with version', r'framework \S+ installed with version \S+ but found version', 7),
    # horovod/horovod horovod/common/ops/nccl_operations.cc:1209
    R('version_mismatch', 'requires nccl version >=', r'nccl\w* requires nccl version >= ?\d', 7),
    # horovod/horovod horovod/common/gloo/http_store.cc:54 (and memory_store.cc:52)
    R('rendezvous_timeout', 'horovod_gloo_timeout_seconds', r'wait timeout after|increase the timeout via', 6),
    # horovod/horovod horovod/runner/launch.py:605 (also horovod/ray/runner.py:39)
    R('rendezvous_timeout', 'increase the --start-timeout', weight=7),
    # horovod/horovod horovod/runner/driver/driver_service.py:155 (and spark/driver/driver_service.py:210)
    R('network_interface', 'common task-to-task communication interfaces', weight=7),
    # horovod/horovod horovod/runner/driver/driver_service.py:211
    R('network_interface', 'no interface is found for address 127.0.0.1', weight=5),
    # horovod/horovod horovod/runner/gloo_run.py:185
    R('worker_killed', 'exit with status code', r'process \d+ exit with status code -?(9|137|11)\b', 6),
    # microsoft/DeepSpeed op_builder/builder.py:158 (also :170 CUDA, :179 HIP)
    R('version_mismatch', 'deepspeed ops were compiled and installed', weight=7),
    # huggingface/accelerate src/accelerate/utils/launch.py:245 (and :516)
    R('port_in_use', 'but another process is utilizing it', weight=8),
    # huggingface/accelerate src/accelerate/utils/operations.py:396
    R('collective_mismatch', 'due to shape mismatches', r'cannot apply desired operation due to shape mismatches', 7),
    # NVIDIA/Megatron-LM megatron/training/checkpointing.py:401
    R('checkpoint_corrupt', 'invalid metadata file', r'error: invalid metadata file', 6),
    # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/validation.py:583
    R('checkpoint_corrupt', 'checkpoint integrity verification failed', weight=7),
    # NVIDIA/Megatron-LM megatron/training/checkpointing.py:421
    R('checkpoint_corrupt', 'metadata while max iteration across the ranks', weight=4),
    # huggingface/transformers src/transformers/modeling_utils.py (load_state_dict)
    R('checkpoint_corrupt', 'without having git-lfs installed', weight=6),
    # huggingface/transformers src/transformers/modeling_utils.py (load_state_dict)
    R('checkpoint_corrupt', 'unable to load weights from pytorch checkpoint file', weight=6),
    # ray-project/ray python/ray/util/collective/collective_group/nccl_collective_group.py (Rendezvous.meet)
    R('rendezvous_timeout', 'unable to meet other processes', r'unable to meet other processes at the rendezvous store', 6),
    # ray-project/ray python/ray/util/collective/collective_group/nccl_collective_group.py (Rendezvous.get_nccl_id)
    R('rendezvous_timeout', 'unable to get the ncc', r'unable to get the nccluniqueid from the store', 6),
    # ray-project/ray python/ray/util/collective/collective_group/nccl_collective_group.py (NCCLGroup.__init__)
    R('version_mismatch', 'nccl in ray requires nccl', weight=6),
    # ray-project/ray python/ray/train/v2/_internal/exceptions.py (WorkerGroupStartupTimeoutError)
    R('rendezvous_timeout', 'the worker group startup timed out after', weight=5),
    # vllm-project/vllm vllm/v1/executor/multiproc_executor.py (worker monitor)
    R('worker_killed', 'died unexpectedly, shutting down executor', weight=5),
    # vllm-project/vllm vllm/v1/engine/utils.py (wait_for_engine_startup)
    R('worker_killed', 'failed core proc(s):', r'failed core proc\(s\): \{.*:\s*-(9|11)\}', 7),
    # vllm-project/vllm vllm/v1/engine/core.py (startup_handshake)
    R('rendezvous_timeout', 'did not receive response from front-end', r'did not receive response from front-end process within \d+ minutes', 5),
    # vllm-project/vllm vllm/v1/engine/core_client.py (MPClient.__init__)
    R('rendezvous_timeout', 'timed out waiting for engines to send', weight=4),
    # vllm-project/vllm vllm/v1/executor/multiproc_executor.py (collective_rpc)
    R('collective_timeout', 'rpc call to', r'rpc call to (execute_model|sample_tokens|\w+) timed out', 4),
    # vllm-project/vllm vllm/v1/worker/gpu_worker.py (init_device)
    R('oom_in_collective', 'is less than desired gpu memory utilization', weight=5),
    # vllm-project/vllm vllm/v1/core/kv_cache_utils.py (check_enough_kv_cache_memory)
    R('oom_in_collective', 'no available memory for the cache blocks', weight=5),
    # vllm-project/vllm vllm/distributed/device_communicators/pynccl_wrapper.py (NCCLLibrary.__init__)
    R('version_mismatch', 'failed to load nccl library from', weight=5),
    # vllm-project/vllm vllm/utils.py (get_ip)
    R('network_interface', 'failed to get the ip address, using 0.0.0.0', weight=3, in_warnings=True),
    # sgl-project/sglang python/sglang/srt/model_executor/model_runner.py (load_model, monitored_barrier)
    R('rendezvous_timeout', "other ranks that didn't finish loading", weight=5),
    # sgl-project/sglang python/sglang/srt/model_executor/model_runner.py (init_torch_distributed)
    R('oom_in_collective', 'the memory capacity is unbalanced', weight=4),
    # sgl-project/sglang python/sglang/srt/model_executor/model_runner.py (init_memory_pool)
    R('oom_in_collective', 'please try to increase --mem-fraction-static', weight=5),
    # sgl-project/sglang python/sglang/srt/entrypoints/engine.py (_launch_subprocesses, after 'scheduler is dead')
    R('worker_killed', 'exit code: -9', r'\bexit code: -9\b', 6),
    # sgl-project/sglang python/sglang/srt/entrypoints/engine.py (_launch_subprocesses)
    R('worker_killed', 'scheduler is dead', r'rank \d+ scheduler is dead', 3),
    # microsoft/DeepSpeed deepspeed/utils/zero_to_fp32.py:172
    R('checkpoint_corrupt', "didn't get saved by one or more processes", weight=7),
    # microsoft/DeepSpeed deepspeed/utils/zero_to_fp32.py:320 (and :485)
    R('checkpoint_corrupt', 'numels out of', r'consumed \d+ numels out of \d+ - something is wrong', 4),
    # sgl-project/sglang python/sglang/srt/entrypoints/engine.py (_set_envs_and_config sigchld_handler)
    R('worker_killed', 'child process unexpectedly failed with', r'failed with (exitcode=|an exit code )(9|137)\b', 6),
    # sgl-project/sglang python/sglang/srt/utils/common.py (assert_pkg_version)
    R('version_mismatch', 'which is less than the minimum required version', r'is installed with version \S+, which is less than the minimum required version', 5),
    # vllm-project/vllm vllm/platforms/cuda.py (check_if_supports_dtype; older vllm/worker/worker.py _check_if_gpu_suppo
    R('version_mismatch', 'is only supported on gpus with compute capability', r'bfloat16 is only supported on gpus with compute capability of at least', 4),
    # vllm-project/vllm vllm/executor/ray_distributed_executor.py (_init_workers_ray)
    R('network_interface', 'every node should have a unique ip address', weight=6),
    # ray-project/ray python/ray/train/v2/_internal/execution/worker_group/worker_group.py (poll_status)
    R('worker_killed', 'a worker health check failed', weight=4),
    # huggingface/transformers src/transformers/modeling_utils.py (load_state_dict)
    R('checkpoint_corrupt', 'which is necessary to load this pretrained model', r'unable to locate the file .* which is necessary to load this pretrained model', 4),
    # Lightning-AI/pytorch-lightning src/lightning/fabric/strategies/launchers/subprocess_script.py:220
    R('worker_killed', 'terminated with code', r'child process with pid \d+ terminated with code (-9|-11|137)\b', 6),
    # sgl-project/sglang python/sglang/srt/managers/scheduler.py (watchdog_thread)
    R('collective_timeout', 'scheduler watchdog timeout', weight=4),
    # vllm-project/vllm vllm/engine/async_llm_engine.py (run_engine_loop)
    R('collective_timeout', 'engine iteration timed out', weight=4),
    # vllm-project/vllm vllm/v1/engine/core_client.py (MPClient monitor)
    R('worker_killed', 'died unexpectedly, shutting down client', r'engine core proc \S+ died unexpectedly', 3),
    # horovod/horovod horovod/common/gloo/http_store.cc:96
    R('rendezvous_timeout', 'http get request failed too many times', weight=5),
    # --- from the training split's misses, 2026-11-25 (threads of 2024 moved from the test split, and new ones) ---
    R('oom_in_collective', 'error: cuda out of memory', weight=6, in_warnings=True),  # FSDP's state_dict clone() warning
    R('collective_mismatch', 'must have the same number of elements', r'tensor operands to scatter/gather\s+must have the same number', 7),
    # torch's Flight Recorder analyzer (torch/distributed/flight_recorder/components/types.py MatchState)
    R('collective_mismatch', 'error type:', r'error type: (size_or_syntax|collective_type|collective_state|collective_dtype)_mismatch', 8),
    # torch built against NCCL >= 2.14's config API loading an older libnccl
    R('version_mismatch', 'invalid config blocking attribute value', weight=6),
    R('nccl_internal_or_invalid_usage', 'invalid rank requested', weight=6),  # nccl/src/init.cc
    R('nccl_internal_or_invalid_usage', 'attribute arch of node cpu not found', weight=6),  # nccl/src/graph/xml.cc topology XML
    # a torch build without torch.distributed (Windows before 1.7, Jetson wheels, ROCm/CPU builds without it)
    R('version_mismatch', 'pytorch built without distributed support', weight=7),
    R('version_mismatch', "has no attribute 'init_process_group'", r"module 'torch\.distributed' has no attribute", 7),
    R('version_mismatch', "from 'torch.distributed'", r"cannot import name '\w+' from 'torch\.distributed'", 5),
    # the DataLoader's advice, whatever line the "Bus error" wrapped onto
    R('dataloader_shm', 'raise your shared memory limit', weight=7),
    R('dataloader_shm', 'is killed by signal: bus', r'is killed by signal: bus\s*$', 7),  # 'error' on the next line
    # a sharded checkpoint with a shard missing or left unfinished
    R('checkpoint_corrupt', 'no such file or directory', r'(zero_pp_rank_\d+|mp_rank_\d+)\S*_(optim|model)_states\.pt', 5),
    R('checkpoint_corrupt', 'filenotfounderror', r'(zero_pp_rank_\d+|mp_rank_\d+)\S*_(optim|model)_states\.pt', 5),
    R('checkpoint_corrupt', 'incomplete checkpoint', weight=5),
    # torch 2.x's wording has the typo: "... is setting up NCCL communicator and retreiving ncclUniqueId from [0]"
    R('rendezvous_timeout', 'retreiving nccluniqueid', r'got error|timeout', 5),
    R('rendezvous_timeout', 'errno: 110 - connection timed out', weight=3),  # c10d's socket.cpp wording
    # Ray's memory monitor and raylet kill workers on host memory pressure
    R('worker_killed', 'killed due to memory pressure', weight=7),
    R('worker_killed', 'ray killed this worker', weight=7),
    R('worker_killed', 'a worker died or was killed while executing a task', weight=4),
    R('infiniband', 'ibv_poll_cq failed', weight=6),  # NVSHMEM / RDMA libraries' completion polling
    # torch 1.x's TCPStore: "ValueError: host not found: Temporary failure in name resolution" (the rule above)
    # NCCL's maintainers: a truncated message is ranks calling collectives inconsistently (or differing protocols);
    # nccl/src/transport/net_socket.cc:636, wrapped or not ("... message truncated :" / "receiving N bytes instead of M")
    R('collective_mismatch', 'message truncated', r'net/(socket|ib)|nccl', 6),
    R('checkpoint_corrupt', 'the following zero checkpoints paths are missing', weight=7),  # deepspeed's engine
    # Windows' WSAEADDRINUSE (10048), as python and torch print it
    R('port_in_use', 'only one usage of each socket address', weight=8),
    # DeepSpeed ZeRO-3's check that every rank fetched parameters in the same order (data-dependent model paths)
    R('collective_mismatch', 'disagreement between rank0 and rank', weight=7),
    R('worker_killed', 'exceeded k8s pod memory limits', weight=6),  # Ray's worker-exit detail
    R('worker_killed', 'the actor died unexpectedly before finishing this task', weight=4),
    # gloo's own timeout exception (torch's gloo, paddle's): "[...pair.cc:587] TIMEOUT self_rank = 0 pair_rank = 1"
    R('collective_timeout', 'timeout self_rank', r'pair\.cc:\d+\] timeout self_rank', 5),
    # an asynchronous CUDA error that the NCCL watchdog found: a CUDA failure surfacing in NCCL's process group
    R('nccl_unhandled_cuda_error', 'watchdog thread terminated with exception: cuda error', weight=6),
    R('infiniband', 'ib failure:', r'status \d+ \(ib failure', 6),  # mscclpp's IbError
    R('version_mismatch', "module 'torch.distributed' has no attribute", weight=6),
    # c10d's retry while the store is not up yet: normal at start-up, a store that never comes up when it is all
    R('rendezvous_timeout', 'is not yet listening', r'errno: 111', 2, alone=True),
    R('nccl_internal_or_invalid_usage', 'no algorithm/protocol available', weight=6),  # nccl/src/enqueue.cc (NCCL_ALGO/PROTO)
    R('infiniband', 'tensorpipe/common/ibv.h', weight=6),
    # Ray's worker on a node whose address is not the one its raylet registered (a VPN, a container bridge, two NICs)
    R('network_interface', 'can not find the matched raylet address', weight=6),
    R('infiniband', 'tensorpipe/transport/ibv', weight=5),  # its ibverbs transport's reactor ("Unknown opcode: 136")
    R('infiniband', 'modify qp', r'failed to modify qp', 5),  # ibv_modify_qp as RDMA engines word it ("... QP to RTS")
    R('infiniband', 'gid', r'\bgid \d+ not available', 5),  # an RDMA device without the configured GID index  # torch.distributed.rpc's TensorPipe ibverbs transport
    R('rendezvous_timeout', 'rendezvousclosederror', weight=5),  # torch.distributed.elastic: a closed (stale) rendezvous
    R('checkpoint_corrupt', 'safetensorerror', weight=4),  # safetensors' exception: a header or file it cannot read
    # --- from the sources of ROCm (rccl, clr, ROCR), oneCCL, UCX, Open MPI / PRRTE / PMIx, Slurm, kubeflow's
    #     PyTorchJob, torchtitan, torchtune, NeMo, TransformerEngine, safetensors and torch's DCP (2026-11-25);
    #     launchers' reports of whatever failed are "alone": they count only when nothing else explains the job ---
    R('nccl_unhandled_cuda_error', "warn hip failure '", weight=7),  # ROCm/rccl src/include/rocmwrap.h CUCHECK/CUCHECKGOTO
    R('nccl_unhandled_cuda_error', "warn hsa failure '", weight=7),  # ROCm/rccl src/include/rocmwrap.h HSACHECK
    R('nccl_unhandled_cuda_error', "rocr failure '", weight=7),  # ROCm/rccl src/include/rocmwrap.h:27 (older releases)
    R('version_mismatch', 'failed to find rocm runtime library', weight=6),  # ROCm/rccl src/misc/rocmwrap.cc:56
    R('version_mismatch', 'please ensure the collective has been enabled in build', weight=6),  # ROCm/rccl src/enqueue.cc:193
    R('version_mismatch', 'please ensure that rccl has been installed properly', weight=4),  # ROCm/rccl src/misc/msccl/msccl_lifecycle.cc:169
    R('version_mismatch', 'hiperrornobinaryforgpu', weight=8),  # ROCm/clr hipamd/src/hip_code_object.cpp:571
    R('worker_killed', 'aborting with error :', r'callback: queue \S+ aborting with error : (?!hsa_status_error_out_of_resources)', 6),  # ROCm/clr rocclr/device/rocm/rocdevice.cpp callbackQueue
    R('oom_in_collective', 'available free mem :', r'hsa_status_error_out_of_resources', 6),  # ROCm/clr rocclr/device/rocm/rocdevice.cpp callbackQueue (OUT_OF_RESOURCES branch
    R('worker_killed', 'memory access fault by gpu node-', weight=6),  # ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp VMFaultHandler
    R('worker_killed', 'hw exception by gpu node-', weight=6),  # ROCm/ROCR-Runtime runtime/hsa-runtime/core/runtime/runtime.cpp:1762
    R('oom_in_collective', 'hip error: out of memory', weight=6),  # pytorch/pytorch c10/hip HIP_CHECK (C10_HIP_CHECK) with ROCm/clr hipGetErrorStrin
    R('version_mismatch', 'no rocm-capable device is detected', weight=4),  # pytorch/pytorch C10_HIP_CHECK; text from ROCm/clr hipamd/src/hip_error.cpp
    R('rendezvous_timeout', 'connection time (', r'connection time \(\d+\) >= limit \(\d+\)', 7),  # uxlfoundation/oneCCL src/atl/util/pm/pmi_resizable_rt/pmi_resizable/kvs/internal
    R('rendezvous_timeout', 'kvs get error: timeout limit', weight=7),  # uxlfoundation/oneCCL src/atl/util/pm/pmi_resizable_rt/pmi_resizable_simple.cpp:2
    R('network_interface', 'to get host ip', r"can't find interface .* to get host ip", 7),  # uxlfoundation/oneCCL src/atl/util/pm/pmi_resizable_rt/pmi_resizable/kvs/internal
    R('network_interface', 'can not get host ip', weight=5),  # uxlfoundation/oneCCL src/atl/util/pm/pmi_resizable_rt/pmi_resizable/kvs/internal
    R('infiniband', 'fi_getinfo error', weight=4),  # uxlfoundation/oneCCL src/atl/ofi/atl_ofi_helper.cpp:867
    R('infiniband', 'fi_cq_readerr: err:', weight=5),  # uxlfoundation/oneCCL src/atl/ofi/atl_ofi_helper.cpp:645
    R('nccl_unhandled_cuda_error', 'ze error at ', r'ze error at \w+, code: ze_result_error', 6),  # uxlfoundation/oneCCL src/sched/entry/ze/ze_call.cpp:43
    R('nccl_system_error', 'failed to start worker #', weight=5),  # uxlfoundation/oneCCL src/exec/exec.cpp:136
    R('version_mismatch', 'could not initialize any transport library', weight=4),  # uxlfoundation/oneCCL src/common/api_wrapper/api_wrapper.cpp:39
    R('version_mismatch', 'cannot load xpu ccl', weight=5, in_warnings=True),  # intel/torch-ccl oneccl_bindings_for_pytorch/__init__.py
    R('worker_killed', 'caught signal ', r'caught signal (?!7\b)\d+ \(', 5),  # openucx/ucx src/ucs/debug/debug.c:1044 ucs_debug_handle_error_signal
    R('infiniband', 'transport retry count exceeded on', weight=8),  # openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c:132
    R('infiniband', '(synd 0x', r'on \S+:\d+/(ib|roce) \(synd 0x[0-9a-f]+ vend 0x', 7),  # openucx/ucx src/uct/ib/mlx5/ib_mlx5_log.c uct_ib_mlx5_completion_with_err
    R('infiniband', 'unhandled timeout error', r'ud endpoint \S+ to .*unhandled timeout error', 7),  # openucx/ucx src/uct/ib/ud/base/ud_ep.c:296
    R('infiniband', 'will not be handled since no error callback is installed', r"error 'endpoint timeout'", 5),  # openucx/ucx src/ucp/core/ucp_ep.c:1661
    R('worker_killed', 'will not be handled since no error callback is installed', r"error 'connection reset by remote peer'", 5),  # openucx/ucx src/ucp/core/ucp_ep.c:1661
    R('network_interface', 'is not available, please use one or more of', r'network devices? .* (is|are) not available', 6),  # openucx/ucx src/ucp/core/ucp_context.c:1508 ucp_report_unavailable
    R('infiniband', 'is not available, please use one or more of', r"transports? '(rc|ud|dc)[a-z_]*' (is|are) not available", 5),  # openucx/ucx src/ucp/core/ucp_context.c:1508 ucp_report_unavailable
    R('infiniband', 'no usable transports/devices', weight=5),  # openucx/ucx src/ucp/core/ucp_context.c:1770
    R('infiniband', 'ibv_reg_mr(address=', weight=6),  # openucx/ucx src/uct/ib/base/ib_md.c:300 uct_ib_md_print_mem_reg_err_msg
    R('infiniband', 'ibv_fork_init() was disabled or failed, yet a fork() has been issued', weight=3),  # openucx/ucx src/uct/ib/base/ib_md.c:927
    R('nccl_unhandled_cuda_error', 'failed to open ipc mem handle', weight=6),  # openucx/ucx src/uct/cuda/cuda_ipc/cuda_ipc_cache.c:757
    R('network_interface', 'failed: destination is unreachable', r'ucp_ep_create\(proc=\d+\) failed', 6),  # open-mpi/ompi ompi/mca/pml/ucx/pml_ucx.c:429 (v4.1.x)
    R('network_interface', 'failed to resolve ucx endpoint for rank', weight=5),  # open-mpi/ompi ompi/mca/pml/ucx/pml_ucx.c:482 (v4.1.x)
    R('worker_killed', 'orte has lost communication with a remote daemon', weight=6),  # open-mpi/ompi orte/mca/errmgr/base/help-errmgr-base.txt:67 [node-died] (v4.x)
    R('worker_killed', 'prte has lost communication with a remote daemon', weight=6),  # openpmix/prrte src/mca/errmgr/base/help-errmgr-base.txt:62 [node-died] (Open MPI
    R('rendezvous_timeout', 'daemon has unexpectedly failed after launch and before', weight=6),  # open-mpi/ompi orte/mca/errmgr/base/help-errmgr-base.txt:59 [failed-daemon]; open
    R('rendezvous_timeout', 'a daemon failed to report back after being spawned', weight=6),  # openpmix/prrte src/mca/plm/ssh/plm_ssh_module.c:335
    R('network_interface', 'is unable to establish a communication connection to the', weight=6),  # open-mpi/ompi orte/mca/errmgr/base/help-errmgr-base.txt:90 [no-connect]
    R('worker_killed', 'noticed that process rank', r'noticed that process rank \d+ with pid \d+ on node \S+ exited on signal (9|11)\b', 8),  # open-mpi/ompi orte/tools/orterun/help-orterun.txt:140 [orterun:proc-aborted-strs
    R('worker_killed', 'noticed that process rank', r'noticed that process rank \d+ with pid \d+ on node \S+ exited on', 5, alone=True),  # open-mpi/ompi orte/tools/orterun/help-orterun.txt:140 [orterun:proc-aborted-strs
    R('worker_killed', 'has exited due to process rank', r'has exited due to process rank \d+ with pid \d+ on', 5, alone=True),  # open-mpi/ompi orte/tools/orterun/help-orterun.txt:100 [orterun:proc-exit-no-sync
    R('worker_killed', 'mpi_abort was invoked on rank', weight=3, alone=True),  # open-mpi/ompi ompi/mpi/help-mpi-api.txt:16
    R('network_interface', 'are unable to reach each other for', weight=6),  # open-mpi/ompi ompi/mca/bml/r2/help-mca-bml-r2.txt:23 [unreachable proc]
    R('infiniband', 'the infiniband retry count between two mpi processes has been', weight=8),  # open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib.txt:196 [pp retry exceeded
    R('infiniband', 'there was an error initializing an openfabrics device', weight=4),  # open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib.txt:241 (v4.x)
    R('infiniband', 'btl failed to initialize while trying to', weight=6),  # open-mpi/ompi opal/mca/btl/openib/help-mpi-btl-openib.txt:113 [init-fail-no-mem]
    R('network_interface', 'open mpi failed to tcp connect to a peer mpi process', weight=6),  # open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt:34 [client connect fail], bt
    R('network_interface', 'another open mpi process but cannot find a corresponding process', weight=5),  # open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt:128 [server accept cannot fi
    R('network_interface', 'open mpi detected an inbound mpi tcp connection request from a peer', weight=5),  # open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt:88 [dropped inbound connecti
    R('worker_killed', 'an mpi communication peer process has unexpectedly disconnected', weight=6),  # open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt:72 [peer hung up]
    R('network_interface', 'an invalid value was given for btl_tcp_if_', weight=6),  # open-mpi/ompi opal/mca/btl/tcp/help-mpi-btl-tcp.txt:18 [invalid if_inexclude]
    R('rendezvous_timeout', 'pmix error: unreachable', weight=4),  # openpmix/openpmix src/util/pmix_error.h:47 PMIX_ERROR_LOG
    R('rendezvous_timeout', 'a request has timed out and will therefore fail', weight=5),  # open-mpi/ompi orte/orted/help-orted.txt:65 [timedout] (v4.x)
    R('worker_killed', 'due to time limit ***', r'cancelled at \S+ due to time limit', 4, alone=True),  # SchedMD/slurm src/slurmd/slurmstepd/req.c:1122
    R('worker_killed', 'due to preemption ***', weight=7),  # SchedMD/slurm src/slurmd/slurmstepd/req.c:1126
    R('worker_killed', 'due to node failure', r'cancelled at \S+ due to node', 8),  # SchedMD/slurm src/slurmd/slurmstepd/req.c:1130
    R('worker_killed', ' cancelled at ', r'\*\*\* (job|step) \S+ on \S+ cancelled at \S+', 4, alone=True),  # SchedMD/slurm src/slurmd/slurmstepd/req.c (older releases; scancel without a rea
    R('worker_killed', 'due to signal', r'cancelled at \S+ due to signal', 4, alone=True),  # SchedMD/slurm src/slurmd/slurmstepd/req.c:1144
    R('worker_killed', 'due to task failure ***', weight=6, alone=True),  # SchedMD/slurm src/slurmd/slurmstepd/req.c:1149
    R('worker_killed', 'some of the step tasks have been oom killed', weight=8),  # SchedMD/slurm src/plugins/task/cgroup/task_cgroup_memory.c:291
    R('worker_killed', 'srun: error:', r'srun: error: \S+: tasks? [0-9,\-\[\]]+: out of memory', 8),  # SchedMD/slurm src/srun/launch.c:377
    R('worker_killed', 'srun: error:', r'srun: error: \S+: tasks? [0-9,\-\[\]]+: killed', 5, alone=True),  # SchedMD/slurm src/srun/launch.c (WIFSIGNALED branch, strsignal text)
    R('worker_killed', 'srun: error:', r'srun: error: \S+: tasks? [0-9,\-\[\]]+: (segmentation fault|bus error)', 7),  # SchedMD/slurm src/srun/launch.c (WIFSIGNALED branch, strsignal text)
    R('worker_killed', 'node failure on ', r'error: node failure on \S+', 7),  # SchedMD/slurm src/api/step_launch.c:1245 / src/srun/allocate.c:157
    R('worker_killed', 'job step aborted: waiting up to', weight=5, alone=True),  # SchedMD/slurm src/api/step_launch.c:743
    R('worker_killed', 'timed out waiting for job step to complete', weight=4, alone=True),  # SchedMD/slurm src/api/step_launch.c:751
    R('worker_killed', 'due to job not ending with signals', weight=5, alone=True),  # SchedMD/slurm src/slurmd/slurmstepd/step_terminate_monitor.c:147
    R('worker_killed', 'exceeded job memory limit', weight=6),  # SchedMD/slurm src/slurmd/slurmd/job_mem_limit.c:114 / src/interfaces/jobacct_gat
    R('rendezvous_timeout', 'collective timeout seq=', weight=6),  # SchedMD/slurm src/plugins/mpi/pmix/pmixp_coll_ring.c:736 / pmixp_coll_tree.c:131
    R('rendezvous_timeout', 'task launch for ', r'task launch for \S+ failed on node', 5),  # SchedMD/slurm src/api/step_launch.c:1670
    R('worker_killed', 'replica(s) failed.', r'pytorchjob \S+ is failed because \d+ \w+ replica\(s\) failed', 5, alone=True),  # kubeflow/training-operator pkg/controller.v1/pytorch/pytorchjob_controller.go:43
    R('worker_killed', 'replica(s) failed.', r'is restarting because \d+ \w+ replica\(s\) failed', 4, alone=True),  # kubeflow/training-operator pkg/controller.v1/pytorch/pytorchjob_controller.go:43
    R('worker_killed', 'has failed because it has reached the specified backoff limit', weight=4, alone=True),  # kubeflow/training-operator pkg/controller.v1/common/job.go:210
    R('worker_killed', 'was active longer than specified deadline', weight=4, alone=True),  # kubeflow/training-operator pkg/controller.v1/common/job.go:212
    R('checkpoint_corrupt', '--checkpoint.load_step=', r'load_step=\d+ not found', 5),  # pytorch/torchtitan torchtitan/components/checkpointer/dcp.py:587
    R('checkpoint_corrupt', 'checkpoint.initial_load_path is invalid', weight=5),  # pytorch/torchtitan torchtitan/components/checkpointer/dcp.py:547
    R('checkpoint_corrupt', 'unable to load checkpoint from', weight=6),  # pytorch/torchtune torchtune/training/checkpointing/_utils.py:279
    R('checkpoint_corrupt', 'checkpoint does not contain the required keys needed for updating recipe state', weight=6),  # pytorch/torchtune recipes/full_finetune_distributed.py:321
    R('checkpoint_corrupt', 'checkpoint failed to save asynchronously to', weight=4),  # pytorch/torchtune torchtune/training/checkpointing/_checkpointer.py:1438
    R('checkpoint_corrupt', 'checkpoint is unfinished and cannot be used to resume the training', weight=7),  # NVIDIA/NeMo nemo/lightning/resume.py:225
    R('checkpoint_corrupt', 'removing unfinished', r'removing unfinished (dist )?checkpoint', 5),  # NVIDIA/NeMo nemo/utils/callbacks/nemo_model_checkpoint.py:700 / nemo/lightning/p
    R('checkpoint_corrupt', 'there were no checkpoints found in checkpoint_dir', r'cannot resume', 5),  # NVIDIA/NeMo nemo/lightning/resume.py:249
    R('version_mismatch', 'transformer engine package version mismatch', weight=8),  # NVIDIA/TransformerEngine transformer_engine/common/__init__.py:181
    R('version_mismatch', 'nccl ep requires nccl >=', weight=6),  # NVIDIA/TransformerEngine transformer_engine/__init__.py:51
    R('version_mismatch', 'requires building transformer engine with nvte_ub_with_mpi=1', weight=5),  # NVIDIA/TransformerEngine transformer_engine/common/comm_gemm_overlap/userbuffers
    R('collective_timeout', ']: expecting ', r'(reduce-scatter|allgather|allreduce reduce-scatter): sm \d+ \[\d+\]: expecting \d+ got \d+', 6),  # NVIDIA/TransformerEngine transformer_engine/common/comm_gemm_overlap/userbuffers
    R('checkpoint_corrupt', 'metadataincompletebuffer', weight=8),  # huggingface/safetensors bindings/python/src/lib.rs:624 (Debug form of SafeTensor
    R('checkpoint_corrupt', 'incomplete metadata, file not fully covered', weight=8),  # huggingface/safetensors safetensors/src/tensor.rs:88 via bindings/python/src/lib
    R('checkpoint_corrupt', 'headertoolarge', weight=7),  # huggingface/safetensors bindings/python/src/lib.rs:624 (Debug form of SafeTensor
    R('checkpoint_corrupt', 'invalidheaderdeserialization', weight=6),  # huggingface/safetensors bindings/python/src/lib.rs:624 (Debug form of SafeTensor
    R('checkpoint_corrupt', 'invalid json in header', weight=6),  # huggingface/safetensors safetensors/src/tensor.rs:71
    R('checkpoint_corrupt', 'invalid offset for tensor', weight=6),  # huggingface/safetensors safetensors/src/tensor.rs:78
    R('checkpoint_corrupt', 'file does not contain tensor', weight=4),  # huggingface/safetensors bindings/python/src/lib.rs:809
    R('checkpoint_corrupt', 'no such file or directory', r'no such file or directory: \S+\.safetensors', 5),  # huggingface/safetensors bindings/python/src/lib.rs:604 safe_open
    R('checkpoint_corrupt', 'checkpointexception ranks:', weight=3),  # pytorch/pytorch torch/distributed/checkpoint/api.py CheckpointException.__str__
    R('checkpoint_corrupt', 'assert metadata is not none', weight=5),  # DCP's load_state_dict: no .metadata written
    R('checkpoint_corrupt', '.metadata', r"no such file or directory: '[^']*\.metadata'", 6),  # pytorch/pytorch torch/distributed/checkpoint/filesystem.py FileSystemReader.read
    # RDMA engines as their source prints them (kvcache-ai/Mooncake, ai-dynamo/nixl, NVIDIA/nvshmem, deepseek-ai/DeepEP,
    # aws/aws-ofi-nccl) and NCCL's newest IB transport; the messages are in nbhelpers/data/library_messages.jsonl
    R('infiniband', 'worker: process failed for slice', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/worker_pool.cpp:654
    R('infiniband', 'check mtu, gid, peer lid, peer qp num', weight=7),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_endpoint.cpp:1194
    R('infiniband', 'check local context port num', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_endpoint.cpp:1149
    R('infiniband', 'gid is null, please check your gid index', weight=7),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:1400
    R('infiniband', 'no suitable gid found', r'no suitable gid found (on|while refreshing)', 6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:1369
    R('infiniband', 'failed to open device', r'failed to open device \S+ on port \d+ with gid', 6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:211
    R('infiniband', 'port not active', r'device \S+ port not active', 6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:1228
    R('infiniband', 'failed to register memory', r'failed to register memory (0x)?[0-9a-f]+: .*\[\d+\]', 6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:602
    R('infiniband', 'failed to create qp', r'failed to create qp: .*\[\d+\]', 6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_endpoint.cpp:145
    R('infiniband', 'context is not active:', weight=5),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:716
    R('infiniband', 'no matched device found', weight=5),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:1433
    R('infiniband', 'rdmatransport: no available rnic', weight=7),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_transport.cpp:1139
    R('infiniband', 'received context async event', r'received context async event (local catastrophic error|port error|cq error|srq catastrophic error|[\w ]*work queue (catastrophic )?error)', 6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/worker_pool.cpp:1014
    R('infiniband', 'dma buf supported required for gpu rdma', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/rdma_context.cpp:1328
    R('infiniband', 'fi_getinfo failed for device', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/efa_transport/efa_context.cpp:129
    R('infiniband', 'efa cq error:', weight=7),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/efa_transport/efa_context.cpp:1241
    R('rendezvous_timeout', 'etcdstorageplugin: unable to connect', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transfer_metadata_plugin.cpp:454
    R('rendezvous_timeout', 'etcdstorageplugin: unable to get', weight=5),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transfer_metadata_plugin.cpp:468
    R('version_mismatch', 'unable to find metadata storage plugin', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transfer_metadata_plugin.cpp:592
    R('port_in_use', 'sockethandshakeplugin: bind', r'address already in use|\[98\]', 7),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transfer_metadata_plugin.cpp:715
    R('rendezvous_timeout', 'sockethandshakeplugin: connect()', r'connection (timed out|refused)', 5),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transfer_metadata_plugin.cpp:1007
    R('network_interface', 'not valid lan address found', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transfer_engine_impl.cpp:165
    R('rendezvous_timeout', 'check the availability of metadata storage', weight=6),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/tcp_transport/tcp_transport.cpp:337
    R('rendezvous_timeout', 'timed out waiting for rdma ready ack', weight=5),  # kvcache-ai/Mooncake mooncake-transfer-engine/src/transport/rdma_transport/worker_pool.cpp:510
    R('version_mismatch', 'version mismatch: server=', weight=7),  # kvcache-ai/Mooncake mooncake-store/src/master_client.cpp:459
    R('rendezvous_timeout', 'failed to ping master for', weight=5),  # kvcache-ai/Mooncake mooncake-store/src/client_service.cpp:4897
    R('version_mismatch', 'vram memory is detected as host by ucx', weight=7),  # ai-dynamo/nixl src/plugins/ucx/ucx_utils.cpp:660
    R('version_mismatch', 'but ucx cuda support was not found', weight=6),  # ai-dynamo/nixl src/plugins/ucx/ucx_utils.cpp:712
    R('version_mismatch', 'plugin api version mismatch for', weight=7),  # ai-dynamo/nixl src/core/nixl_plugin_manager.cpp:115
    R('infiniband', 'failed to ucp_mem_map', r'^(?!.*out of memory)', 5),  # ai-dynamo/nixl src/plugins/ucx/ucx_utils.cpp:645
    R('worker_killed', 'ucx am send failed with status', r'connection reset by remote peer', 5),  # ai-dynamo/nixl src/plugins/ucx/ucx_utils.cpp:212
    R('worker_killed', 'was disconnected after transfer request creation', weight=6),  # ai-dynamo/nixl src/core/nixl_agent.cpp:1191
    R('worker_killed', 'nixl_err_remote_disconnect', weight=5),  # ai-dynamo/nixl src/bindings/python/nixl_bindings.cpp:128
    R('rendezvous_timeout', 'failed to announce agent', r'in etcd', 5),  # ai-dynamo/nixl src/core/nixl_etcd_metadata_backend.cpp:105
    R('rendezvous_timeout', 'watch timed out for key', weight=5),  # ai-dynamo/nixl src/core/nixl_etcd_metadata_backend.cpp:236
    R('rendezvous_timeout', 'poll timed out for ip_addr', weight=5),  # ai-dynamo/nixl src/core/nixl_p2p_metadata_backend.cpp:85
    R('rendezvous_timeout', 'p2p backend could not connect to ip', weight=5),  # ai-dynamo/nixl src/core/nixl_p2p_metadata_backend.cpp:325
    R('rendezvous_timeout', 'connection cannot be established', r'handshake from peer .* not received after', 6),  # ai-dynamo/nixl src/plugins/libfabric/libfabric_backend.cpp:914
    R('infiniband', 'fi_getinfo failed for rail', weight=6),  # ai-dynamo/nixl src/utils/libfabric/libfabric_rail.cpp:458
    R('infiniband', 'cq read failed on rail', weight=6),  # ai-dynamo/nixl src/utils/libfabric/libfabric_rail.cpp:755
    R('oom_in_collective', 'nvshmem malloc failed', weight=8),  # NVIDIA/nvshmem src/host/mem/mem_heap.cpp:2266
    R('oom_in_collective', 'cumemalloc failed', r'mem_heap\.cpp:\d+: non-zero status: 2 cumemalloc failed', 6),  # NVIDIA/nvshmem src/host/mem/mem_heap.cpp:341
    R('infiniband', 'init failed for transport: ibgda', weight=6),  # NVIDIA/nvshmem src/host/transport/transport.cpp:282
    R('infiniband', 'neither nv_peer_mem, or nvidia_peermem detected', weight=7),  # NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp:4558
    R('infiniband', 'mem registration failed. reason:', weight=7),  # NVIDIA/nvshmem src/modules/transport/common/transport_ib_common.cpp:128
    R('infiniband', 'error in mlx5dv_devx_obj_modify for', weight=7),  # NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp:1681
    R('infiniband', 'does not support all necessary atomic operations', weight=5),  # NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp:4702
    R('infiniband', 'unable to dlopen libibverbs', weight=6),  # NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp:4501
    R('version_mismatch', 'incompatible version of the transport interface', weight=8),  # NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp:4412
    R('version_mismatch', 'uid bootstrap versions not compatible', weight=7),  # NVIDIA/nvshmem src/modules/bootstrap/uid/bootstrap_uid.cpp:220
    R('collective_timeout', 'deepep timeout for', r'deepep timeout for (dispatch|combine|barrier)', 7),  # deepseek-ai/DeepEP csrc/kernels/legacy/intranode.cu:461
    R('collective_timeout', 'rdma sender timeout', r'deepep .*rdma sender timeout', 7),  # deepseek-ai/DeepEP csrc/kernels/legacy/internode.cu:654
    R('collective_timeout', 'nvl receiver timeout', r'deepep .*nvl receiver timeout', 7),  # deepseek-ai/DeepEP csrc/kernels/legacy/internode.cu:1117
    R('collective_timeout', 'deepep error: cpu recv timeout', weight=7),  # deepseek-ai/DeepEP csrc/legacy/buffer.hpp:596
    R('collective_timeout', 'deepep error: timeout (dispatch cpu)', weight=7),  # deepseek-ai/DeepEP csrc/legacy/buffer.hpp:1105
    R('collective_timeout', 'dispatch cpu wait exception', weight=6),  # deepseek-ai/DeepEP csrc/elastic/buffer.hpp:1063
    R('collective_timeout', 'nvlink barrier timeout', r'deepep nvlink barrier timeout', 6),  # deepseek-ai/DeepEP deep_ep/include/deep_ep/common/comm.cuh:122
    R('infiniband', 'completed with error: err:', r'net/ofi request \S+ \(\w+\) completed with error', 7),  # aws/aws-ofi-nccl include/nccl_ofi_platform.h:125
    R('infiniband', 'security group on either this instance or the peer instance', weight=7),  # aws/aws-ofi-nccl src/platform-aws.cpp:1049
    R('infiniband', 'ofi fi_getinfo() call failed', weight=7),  # aws/aws-ofi-nccl src/nccl_ofi_rdma.cpp:7308
    R('infiniband', 'unable to find a protocol that worked', weight=6),  # aws/aws-ofi-nccl src/nccl_ofi_net.cpp:334
    R('infiniband', 'remote write completed with error', weight=7),  # aws/aws-ofi-nccl src/nccl_ofi_rdma.cpp:1463
    R('infiniband', 'unable to register memory (type =', weight=6),  # aws/aws-ofi-nccl src/nccl_ofi_sendrecv.cpp:582
    R('version_mismatch', 'fi_opt_cuda_api_permitted is not declared', weight=6),  # aws/aws-ofi-nccl src/nccl_ofi_ofiutils.cpp:393
    R('version_mismatch', 'failed to find cuda runtime library', weight=6),  # aws/aws-ofi-nccl src/nccl_ofi_cuda.cpp:152
    R('infiniband', 'async fatal event', r'net/ib.*async fatal event', 8),  # NVIDIA/nccl src/transport/net_ib/common.cc:123
    R('infiniband', 'gid table changed', r'net/ib.*gid table changed', 5),  # NVIDIA/nccl src/transport/net_ib/common.cc:153
    R('network_interface', 'net/ib : no ip interface found', weight=7),  # NVIDIA/nccl src/transport/net_ib/init.cc:307
    R('infiniband', 'attempted to merge incompatible devices', weight=6),  # NVIDIA/nccl src/transport/net_ib/init.cc:250
    R('infiniband', 'net/ib : unable to open device', weight=7),  # NVIDIA/nccl src/transport/net_ib/init.cc:334
    R('infiniband', 'unable to query port_num', r'net/ib', 6),  # NVIDIA/nccl src/transport/net_ib/init.cc:360
    R('infiniband', 'mlx5dv_create_qp failed to create qp', weight=7),  # NVIDIA/nccl src/transport/net_ib/connect.cc:372
    R('infiniband', 'failed in ncclibrocegetversionnum', weight=6),  # NVIDIA/nccl src/transport/net_ib/connect.cc:242
    R('infiniband', 'got cqe with error', r'net/ib', 7),  # NVIDIA/nccl src/transport/net_ib/p2p.cc:854
    R('infiniband', 'failed devices out of', r'net/ib: fatal error\. detected \d+ failed devices', 7),  # NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc:47
    R('infiniband', 'could not find a replacement qp', weight=6),  # NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc:116
    R('infiniband', 'marked as failed. initiating recovery', weight=5),  # NVIDIA/nccl src/transport/net_ib/p2p_resiliency.cc:376
    R('network_interface', 'no valid [ipv6]:port pair found', weight=5),  # NVIDIA/nccl src/misc/socket.cc:290
    # the frameworks' own messages, from their sources (DeepSpeed, accelerate, Lightning, verl, ms-swift, LlamaFactory,
    # Megatron-LM, vLLM, sglang); the messages are in nbhelpers/data/library_messages.jsonl
    R('rendezvous_timeout', 'unable to detect suitable master address', None, 5),  # deepspeedai/DeepSpeed deepspeed/launcher/runner.py:506
    R('collective_mismatch', 'does not match torch world size', r'mpi world size \d+ does not match torch world size \d+', 6),  # deepspeedai/DeepSpeed deepspeed/comm/comm.py:902
    R('collective_mismatch', 'does not match torch rank', r'mpi rank \d+ does not match torch rank \d+', 6),  # deepspeedai/DeepSpeed deepspeed/comm/comm.py:901
    R('version_mismatch', 'current torch version does not have', None, 6),  # deepspeedai/DeepSpeed deepspeed/comm/torch.py:203
    R('version_mismatch', 'or higher to use symmetric memory', None, 6),  # deepspeedai/DeepSpeed deepspeed/comm/torch.py:457
    R('version_mismatch', 'unable to run elasticity on target deepspeed version', None, 5),  # deepspeedai/DeepSpeed deepspeed/elasticity/elasticity.py:308
    R('version_mismatch', 'due to it not being compatible due to hardware/software issue', None, 6),  # deepspeedai/DeepSpeed op_builder/builder.py:569
    R('version_mismatch', 'no compute capabilities remaining after filtering', None, 6),  # deepspeedai/DeepSpeed op_builder/builder.py:729
    R('checkpoint_corrupt', 'the checkpoint being loaded used a dp world size of', None, 8),  # deepspeedai/DeepSpeed deepspeed/runtime/engine.py:4629
    R('checkpoint_corrupt', 'invalid for universal checkpoint', None, 6),  # deepspeedai/DeepSpeed deepspeed/runtime/engine.py:4311
    R('collective_mismatch', 'is not consistent across all ranks', r'checkpoint tag name .* is not consistent across all ranks', 5),  # deepspeedai/DeepSpeed deepspeed/runtime/engine.py:4741
    R('checkpoint_corrupt', 'expert checkpoint file is corrupt', None, 7),  # deepspeedai/DeepSpeed deepspeed/runtime/engine.py:4129
    R('checkpoint_corrupt', 'invalid checkpoints and world size for sd', None, 7),  # deepspeedai/DeepSpeed deepspeed/runtime/state_dict_factory.py:117
    R('rendezvous_timeout', 'but `master_addr` env was not set', None, 5),  # huggingface/accelerate src/accelerate/state.py:261
    R('version_mismatch', 'is not available, please use', r'your assigned backend \S+ is not available, please use', 4),  # huggingface/accelerate src/accelerate/state.py:197
    R('checkpoint_corrupt', "couldn't find a valid metadata file", None, 6),  # huggingface/accelerate src/accelerate/utils/fsdp_utils.py:492
    R('collective_mismatch', "you can't use batches of different size with", None, 5),  # huggingface/accelerate src/accelerate/data_loader.py:845
    R('collective_mismatch', 'please see the earlier error for more details', r'error found while calling `accelerate\.', 4),  # huggingface/accelerate src/accelerate/utils/operations.py:418
    R('version_mismatch', 'cannot initialize distributed process group', None, 6),  # Lightning-AI/pytorch-lightning src/lightning/fabric/utilities/distributed.py:274
    R('checkpoint_corrupt', 'is not a valid deepspeed checkpoint', None, 5),  # Lightning-AI/pytorch-lightning src/lightning/fabric/strategies/deepspeed.py:928
    R('checkpoint_corrupt', 'deepspeed was unable to load the checkpoint', None, 6),  # Lightning-AI/pytorch-lightning src/lightning/pytorch/strategies/deepspeed.py:701
    R('collective_mismatch', 'within local rank has zero length', None, 6),  # Lightning-AI/pytorch-lightning src/lightning/pytorch/utilities/data.py:114
    R('checkpoint_corrupt', '_world_size_', r'no such file or directory.*(model|optim|extra_state)_world_size_\d+_rank_\d+\.pt', 7),  # volcengine/verl verl/utils/checkpoint/fsdp_checkpoint_manager.py:135
    R('checkpoint_corrupt', 'state dict not found in', r'(optimizer|lr scheduler|rng) state dict not found in .*please check the checkpoint file', 5),  # volcengine/verl verl/utils/checkpoint/megatron_checkpoint_manager.py:383
    R('collective_mismatch', 'is not equal to self.world_size', None, 5),  # volcengine/verl verl/checkpoint_engine/nccl_checkpoint_engine.py:212
    R('rendezvous_timeout', 'dp coordinator process failed to report zmq addresses', None, 4),  # modelscope/ms-swift swift/infer_engine/vllm_engine.py:75
    R('version_mismatch', 'or set `disable_version_check=1` to skip this check', None, 5),  # hiyouga/LlamaFactory src/llamafactory/extras/misc.py:90
    R('version_mismatch', 'is required for a normal functioning of this module', None, 5),  # hiyouga/LlamaFactory src/llamafactory/extras/misc.py:92
    R('checkpoint_corrupt', 'is not a distributed checkpoint', None, 6),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/validation.py:213
    R('checkpoint_corrupt', 'checkpointingexception: checkpoint directory', r'checkpoint directory \S+ does not exist', 5),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/validation.py:210
    R('checkpoint_corrupt', 'integrity manifest not found at', None, 4),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/validation.py:551
    R('checkpoint_corrupt', 'overwriting old incomplete / corrupted checkpoint', None, 4),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/serialization.py:416
    R('checkpoint_corrupt', 'common.pt does not exist', None, 6),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/strategies/common.py:50
    R('checkpoint_corrupt', 'shards after fully parallel loading', None, 7),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/strategies/fully_parallel.py:347
    R('checkpoint_corrupt', 'missing loaded item shard', None, 6),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/strategies/fully_parallel.py:596
    R('version_mismatch', 'uneven sharding not supported for pytorch version', None, 6),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/strategies/torch.py:309
    R('version_mismatch', 'installed nvidia-resiliency-ext does not support', None, 5),  # NVIDIA/Megatron-LM megatron/core/dist_checkpointing/strategies/torch.py:720
    R('checkpoint_corrupt', 'unable to load optimizer from checkpoint', None, 6),  # NVIDIA/Megatron-LM megatron/training/checkpointing.py:3049
    R('checkpoint_corrupt', 'unable to load rng state from checkpoint', None, 5),  # NVIDIA/Megatron-LM megatron/training/checkpointing.py:3132
    R('checkpoint_corrupt', 'unable to load iteration from checkpoint', None, 6),  # NVIDIA/Megatron-LM megatron/training/checkpointing.py:2862
    R('checkpoint_corrupt', 'could not load the checkpoint', r'^\W*(\[rank\d+\]:\s*)?could not load the checkpoint\s*$', 5),  # NVIDIA/Megatron-LM megatron/training/checkpointing.py:2109
    R('checkpoint_corrupt', 'is set but no checkpoint was found under load directory', None, 5),  # NVIDIA/Megatron-LM megatron/training/checkpointing.py:2057
    R('collective_mismatch', 'parameter hashes not matching across dp replicas', None, 6),  # NVIDIA/Megatron-LM megatron/training/training.py:3990
    R('version_mismatch', 'is not supported for the current gpu. minimum capability', None, 7),  # vllm-project/vllm vllm/config/vllm.py
    R('version_mismatch', 'is not supported with compute capability', None, 6),  # vllm-project/vllm vllm/engine/arg_utils.py
    R('rendezvous_timeout', 'timed out waiting for engine core processes to start', None, 4),  # vllm-project/vllm vllm/v1/engine/core_client.py
    R('collective_mismatch', 'nixl compatibility hash mismatch', None, 6),  # vllm-project/vllm vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py
    R('version_mismatch', 'is not available; falling back to gloo', r'distributed backend (nccl|xccl|hccl|rccl)', 5),  # vllm-project/vllm vllm/distributed/parallel_state.py
    R('port_in_use', 'is used by a process already', r'is not available in \d+ seconds', 7),  # sgl-project/sglang python/sglang/srt/utils/common.py
    R('collective_timeout', 'watchdog timeout (self.watchdog_timeout=', None, 4),  # sgl-project/sglang python/sglang/srt/managers/scheduler.py
    R('version_mismatch', 'could not load any common_ops library', None, 6),  # sgl-project/sglang sgl-kernel/python/sgl_kernel/load_utils.py
    R('collective_timeout', 's in kvpoll.waitingforinput', r'timed out after [\d.]+s in kvpoll\.waitingforinput', 5),  # sgl-project/sglang python/sglang/srt/disaggregation/mooncake/conn.py
    R('rendezvous_timeout', 's in kvpoll.bootstrapping', r'timed out after [\d.]+s in kvpoll\.bootstrapping', 4),  # sgl-project/sglang python/sglang/srt/disaggregation/mooncake/conn.py
]

NCCL_VERSION = re.compile(r"NCCL(?:_VERSION=\"?|\s+version\s+)(\d+\.\d+\.\d+)|^\((\d+), (\d+), (\d+)\)\s*$", re.I)
CONTEXT_NEEDLES = ("nccl version", "nccl_version=", "sequencenumber=", "worker_count=", "seqnum=",
                   "global_rank: ")  # whole-log checks
# Lightning's "initializing ddp: GLOBAL_RANK: 3, MEMBER: 4/8", one line per process as it joins the process group
MEMBER = re.compile(r"GLOBAL_RANK: (\d+), MEMBER: \d+/(\d+)")
# an exception raised while the ranks meet (init_process_group, the TCPStore, the rendezvous) that says the
# connection to the store failed: the ranks never all met
INIT_FRAME = re.compile(r"init_process_group|TCPStore|_create_c10d_store|rendezvous|_store_based_barrier|new_group")
TIMED_OUT = re.compile(r"timed? ?out|timeout", re.I)
INIT_LOST = re.compile(r"reset by peer|connection refused|broken pipe|connect\(\) timed out|timed out", re.I)
BARRIER_COUNTS = re.compile(r"world_size=(\d+), worker_count=(\d+)")
SEQ_NUMBER = re.compile(r"\[Rank (\d+)\].*SequenceNumber=(\d+)")
# the watchdog's "WorkNCCL(SeqNum=3742816, OpType=REDUCE, NumelIn=..., ...)": ranks timing out at the same sequence
# number of the same process group in different operations, or in one operation whose sizes must agree but with
# different sizes, called different collectives there (a mismatch, not a slow rank)
WORK_OP = re.compile(r"SeqNum=(\d+),\s*OpType=(\w+)(?:,\s*NumelIn=(\d+))?")
SAME_SIZE_OPS = {"ALLREDUCE", "BROADCAST", "REDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE"}  # not all-to-all
PG_ID = re.compile(r"PG ID (\d+)")
# NCCL_DEBUG_SUBSYS=COLL's line for each collective a process enqueues (NCCL and RCCL, enqueue.cc): "host:pid:tid [dev]
# NCCL INFO AllReduce: opCount 28c sendbuff ... count 9984512 datatype 7 op 0 root 0 comm 0x... [nranks=4] ...".
# Every rank of a communicator numbers its collectives alike, so processes at the same opCount of a communicator
# of the same size that called a different operation, count, type, reduction or root called different collectives
# (NCCL does not check; the job hangs or computes garbage).  Send/Recv are left out: their counts differ by peer.
COLL_OP = re.compile(rb"NCCL INFO (AllReduce|Broadcast|Reduce|AllGather|ReduceScatter): opCount (\w+) sendbuff \S+ "
                     rb"recvbuff \S+ count (\d+) datatype (\d+) op (\d+) root (\d+) comm \S+ \[nranks=(\d+)\]")
COLL_PROCESS = re.compile(rb"([A-Za-z0-9_.-]+):(\d+):\d+ \[\d+\] $")  # "host:pid:tid [dev] " before "NCCL INFO"
URL_ESCAPE = re.compile(rb"%(2[0-9A-Fa-f]|3[A-Fa-f])")  # the punctuation a URL escapes: space, quotes, /, :, ;, =
COLL_WINDOW = 20000  # the latest (nranks, opCount) pairs kept: ranks reach one collective at about the same time
RANK_PATTERNS = [re.compile(p) for p in (r"\[rank(\d+)\]", r"\[Rank (\d+)\]", r"\brank\s*:\s*(\d+)",
                                         r"on rank:? (\d+)", r"\[default(\d+)\]:", r"local_rank:\s*(\d+)")]
TRACE_FRAME = re.compile(rb"\.(?:cc|cu|h):\d+ -> \d+")  # NCCL's error trace, one frame a line
NCCL_PREFIX = re.compile(r"^(?:\S+\s+)?([A-Za-z0-9_.-]+):(\d+):(\d+) \[(\d+)\]")
# a stack frame, not a message: C++ ("frame #2: c10::DistNetworkError::..."), Python ('File "x.py", line 3'), gdb
# and backtrace ("#3 0x7f..."), possibly behind a rank prefix
FRAME_LINE = re.compile(r'^\W*(?:\[rank\d+\]:\s*)?(?:frame #\d+:|File "|#\d+\s+0x[0-9a-f]+|\d+\s+0x[0-9a-f]+\s)')
NBH_PREFIX = re.compile(r"\[([A-Za-z0-9_.-]+):(\d+)\]")

# the errors a context (an interface list, a rank waiting at the store, NCCL's IB trace) can explain: connections
# and hangs, not a CUDA, version, checkpoint, /dev/shm or out-of-memory error
CONNECTION = {"rendezvous_timeout", "port_in_use", "collective_timeout", "nccl_system_error", "nccl_internal_or_invalid_usage",
              "network_interface", "infiniband", "worker_killed"}
PEER_GONE_NEEDLES = {"connection closed by peer", "remote worker crashing"}
# what a rank's peers and its launcher report when it ended with an error of its own: lost connections, torchrun's
# SIGTERMs, a non-kill exit code, MPI's and Slurm's reports of a failed task (not a SIGKILL, an OOM kill, a crash)
PEER_REPORTS = {r for r in RULES if r.category == "worker_killed" and (
    r.alone or r.weight < 2 or r.needle in PEER_GONE_NEEDLES | {"connection reset by peer", "forcefully exiting via signals.sigkill"})}
# exceptions that report a failure elsewhere (torchrun's, mp.spawn's, c10d's wrappers) or an interruption
NOT_OWN = re.compile(r"(?:^|\.)(?:ChildFailedError|ProcessExitedException|ProcessRaisedException|SignalException|"
                     r"KeyboardInterrupt|SystemExit|Dist\w*Error|\w*Timeout\w*|CalledProcessError|RayTaskError\w*|"
                     r"Connection\w*Error|BrokenPipeError)$")  # a lost connection is what peers see
CAUGHT_IN_WORKER = re.compile(r"^Caught \w+ in (?:DataLoader worker process|replica) \d+")
# torchrun's and spawn's reports of a rank's signal, SIGKILL (-9) left out: a kill is never an abort's report
TEARDOWN_SIGNAL_RULES = {r for r in RULES if r.category == "worker_killed" and r.needle in
                         {"received by pid", "exitcode", "terminated with signal"} and "-9" not in (r.pattern or "")}
OVERCOUNT = R("rendezvous_timeout", "worker_count=", None, 5)  # applied by _context, not by needle
# c10d logs "Waiting in store based barrier ..." every 10 s while ranks are missing: one per rank is normal while a
# big job assembles, the same rank waiting three times or more means init has been stuck 30 s or longer (_findings)
WAITING = next(r for r in RULES if r.needle == "waiting in store based barrier")
WAITER = re.compile(r"for rank: (\d+), key: (\S+)")
STUCK_BARRIER = R("rendezvous_timeout", "waiting in store based barrier", None, 3)
STUCK_AFTER = 3
_BY_NEEDLE: dict[str, list[Rule]] = {}
for _r in RULES:
    assert _r.category in CATEGORIES, _r
    assert _r.needle == _r.needle.lower(), _r
    _BY_NEEDLE.setdefault(_r.needle, []).append(_r)


@dataclass
class Evidence:
    line: int          # 1-based line number in the input
    text: str
    rank: int | None = None
    host: str | None = None

    def __str__(self) -> str:
        where = "".join(f" {k}={v}" for k, v in (("rank", self.rank), ("host", self.host)) if v is not None)
        return f"line {self.line}{where}: {self.text}"


@dataclass
class Finding:
    category: str
    confidence: float
    score: float
    evidence: list[Evidence] = field(default_factory=list)
    by: str = "rules"       # "model": the learned second opinion (no rule fired)

    @property
    def failure(self) -> Failure:
        return Failure(self.category)

    @property
    def title(self) -> str:
        return CATEGORIES[self.category].title

    @property
    def explanation(self) -> str:
        return CATEGORIES[self.category].explanation

    @property
    def short_timeout_ms(self) -> int | None:
        """The timeout an evidence line gives, when it is under a second (``Timed out waiting 300ms``): then the
        timeout's value or unit is the fault, not a rank (as the run's ``short_timeout`` rule says)."""
        found = [ms for e in self.evidence if (ms := timeout_ms(e.text)) is not None]
        return min(found) if found and max(found) < SHORT_TIMEOUT_MS else None

    @property
    def remedies(self) -> list[str]:
        short = list(REMEDIES[CulpritRule.SHORT_TIMEOUT]) if self.short_timeout_ms is not None else []
        return short + list(CATEGORIES[self.category].remedies)

    @property
    def is_cause(self) -> bool:
        return self.category not in CONSEQUENCE

    def to_dict(self) -> dict:
        return {"category": self.category, "by": self.by, "title": self.title, "confidence": round(self.confidence, 2),
                "score": round(self.score, 2), "explanation": self.explanation, "remedies": self.remedies,
                "evidence": [{"line": e.line, "rank": e.rank, "host": e.host, "text": e.text} for e in self.evidence]}

    def candidate(self) -> dict:
        """The short form shown as one of the log's top 2: category, confidence, by."""
        return {"category": self.category, "confidence": round(self.confidence, 2), "by": self.by}

    def __repr__(self) -> str:
        return f"<Finding {self.category} conf={self.confidence:.2f} evidence={len(self.evidence)} lines>"


def _evidence(st: "_State", category: str) -> list[Evidence]:
    """A finding's evidence: the messages first, then (room left) the stack frames that matched."""
    return (st.evidence.get(category, []) + st.frames.get(category, []))[:MAX_EVIDENCE]


def _where(line: str) -> tuple[int | None, str | None]:
    host = None
    m = NCCL_PREFIX.search(line)
    if m:
        host = m.group(1)
    m2 = NBH_PREFIX.search(line)
    if m2 and not m:
        return int(m2.group(2)), m2.group(1)
    for p in RANK_PATTERNS:
        m3 = p.search(line)
        if m3:
            return int(m3.group(1)), host
    return None, host


class _State:
    def __init__(self):
        self.hits: dict[str, dict[Rule, int]] = {}
        self.evidence: dict[str, list[Evidence]] = {}
        self.frames: dict[str, list[Evidence]] = {}  # evidence on stack frames: shown after the messages
        self.first_line: dict[str, int] = {}
        self.nccl_versions: dict[str, int] = {}
        self.seq_numbers: dict[int, int] = {}
        self.seq_line: int | None = None
        self.work_ops: dict[tuple[str, int], dict[str, int]] = {}   # (pg, seq) -> {op: first line}
        self.work_sizes: dict[tuple[str, int, str], dict[int, set[int]]] = {}  # (pg, seq, op) -> {rank: {numel}}
        self.coll_ops: OrderedDict[tuple[str, str], dict] = OrderedDict()  # (nranks, opCount) -> {process: (op, line)}
        self.coll_split: tuple[int, str, list[str]] | None = None  # the first opCount where processes disagree
        self.waits: dict[tuple[str, str], int] = {}
        self.members: dict[int, list[int]] = {}  # Lightning's global rank -> the lines that announced it
        self.world: int | None = None
        self.lines = 0
        self.tail = b""        # the last bytes seen: what the model reads when no rule fires

    def tail_text(self) -> tuple[str, int]:
        """The last bytes seen, as text, and the line number of its first line."""
        text = self.tail.decode(errors="replace")
        return text, self.lines - text.count("\n") + 1

    def add(self, rule: Rule, lineno: int, line: str) -> None:
        per = self.hits.setdefault(rule.category, {})
        per[rule] = per.get(rule, 0) + 1
        if rule is WAITING:
            who = WAITER.search(line)
            who = who.groups() if who else ("?", "?")
            self.waits[who] = self.waits.get(who, 0) + 1
        self.first_line.setdefault(rule.category, lineno)
        ev = (self.frames if FRAME_LINE.match(line) else self.evidence).setdefault(rule.category, [])
        if len(ev) < MAX_EVIDENCE and not any(e.line == lineno for e in ev):
            rank, host = _where(line)
            ev.append(Evidence(lineno, line.strip()[:500], rank, host))


_AUTOMATON = None
_NEEDLES: list[str] = []


def _automaton():
    """One Aho-Corasick automaton (ahocorasick-rs, in Rust) over the UTF-8 bytes of every needle."""
    global _AUTOMATON
    if _AUTOMATON is None:
        import ahocorasick_rs

        _NEEDLES[:] = [*_BY_NEEDLE, *CONTEXT_NEEDLES]
        _AUTOMATON = ahocorasick_rs.BytesAhoCorasick([n.encode() for n in _NEEDLES])
    return _AUTOMATON


def _scan(chunk: bytes, base: int, st: _State) -> None:
    """Find every needle in ``chunk`` (whole lines of UTF-8; numbering starts after ``base``), test its rules."""
    found: dict[int, set[int]] = {}   # line start -> indexes of the needles on it
    last_start, last_end = -1, -1
    # bytes.lower() changes ASCII only, so every needle (ASCII) is found and every offset stays put
    for idx, at, _ in _automaton().find_matches_as_indexes(chunk.lower(), overlapping=True):
        if at >= last_end:  # a new line: locate it once
            last_start = chunk.rfind(b"\n", 0, at) + 1
            last_end = chunk.find(b"\n", at)
            last_end = len(chunk) if last_end < 0 else last_end
        found.setdefault(last_start, set()).add(idx)
    lineno, pos = base + 1, 0
    for start in sorted(found):
        lineno += chunk.count(b"\n", pos, start)
        pos = start
        end = chunk.find(b"\n", start)
        line = (chunk[start:] if end < 0 else chunk[start:end]).decode("utf-8", "replace")
        for needle in (_NEEDLES[i] for i in sorted(found[start])):  # table order: ties resolve the same every run
            if needle in CONTEXT_NEEDLES:
                _context(needle, line, lineno, st)
                continue
            for rule in _BY_NEEDLE[needle]:
                if rule.matches(line) and (rule.in_warnings or not NOISE.search(line)) and \
                        not (rule.origin and start and TRACE_FRAME.search(chunk, chunk.rfind(b"\n", 0, start - 1) + 1, start)):
                    st.add(rule, lineno, line)
    if st.coll_split is None and b": opCount " in chunk:
        _coll_ops(chunk, base, st)
    st.lines = base + chunk.count(b"\n")


def _context(needle: str, line: str, lineno: int, st: _State) -> None:
    if needle == "worker_count=":  # more workers than the world has: stale store keys from an earlier group
        m = BARRIER_COUNTS.search(line)
        if m and int(m.group(2)) > int(m.group(1)):
            st.add(OVERCOUNT, lineno, line)
        return
    if needle == "seqnum=":
        m, pg = WORK_OP.search(line), PG_ID.search(line)
        if m:
            key, op = (pg.group(1) if pg else "", int(m.group(1))), m.group(2).upper()
            st.work_ops.setdefault(key, {}).setdefault(op, lineno)
            rank = _where(line)[0]
            if m.group(3) and op in SAME_SIZE_OPS and rank is not None:
                st.work_sizes.setdefault((*key, op), {}).setdefault(rank, set()).add(int(m.group(3)))
        return
    if needle == "global_rank: ":
        m = MEMBER.search(line)
        if m:
            st.members.setdefault(int(m.group(1)), []).append(lineno)
            st.world = int(m.group(2))
        return
    if needle == "sequencenumber=":
        m = SEQ_NUMBER.search(line)
        if m:
            st.seq_numbers[int(m.group(1))] = int(m.group(2))
            st.seq_line = st.seq_line or lineno
        return
    m = NCCL_VERSION.search(line)
    if m:
        st.nccl_versions.setdefault(m.group(1) or ".".join(m.group(2, 3, 4)), lineno)


def _coll_ops(chunk: bytes, base: int, st: _State) -> None:
    """NCCL's COLL lines in ``chunk``: note each process's collective at each opCount, and the first disagreement."""
    lineno, pos = base + 1, 0
    for m in COLL_OP.finditer(chunk):
        start = chunk.rfind(b"\n", 0, m.start()) + 1
        who = COLL_PROCESS.search(chunk, max(start, m.start() - 120), m.start())
        if not who:
            continue
        lineno += chunk.count(b"\n", pos, start)
        pos = start
        op, count_, count, dtype, redop, root, nranks = (g.decode() for g in m.groups())
        seen = st.coll_ops.get((nranks, count_))
        if seen is None:
            seen = st.coll_ops[(nranks, count_)] = {}
            if len(st.coll_ops) > COLL_WINDOW:
                st.coll_ops.popitem(last=False)
        what = (op, count, dtype, redop if op in ("AllReduce", "Reduce", "ReduceScatter") else "",
                root if op in ("Broadcast", "Reduce") else "")
        proc = who.groups()
        if proc in seen:  # a second communicator of this size in the process: its opCounts say nothing here
            if seen[proc][0] != what:
                seen[proc] = (None, lineno)
            continue
        first = next(iter(seen.values()), None)
        seen[proc] = (what, lineno)
        if first is None or first[0] == what:
            continue
        kinds = {w: n for w, n in seen.values() if w is not None}
        if len(kinds) >= 2:
            shown = [f"{w[0]} count {w[1]} datatype {w[2]}" + (f" root {w[4]}" if w[4] else "") for w in kinds]
            st.coll_split = (min(kinds.values()), count_, sorted(shown))
            return


def _own_error(text: str, first: int, in_user_code: bool = False) -> Evidence | None:
    """The first exception a rank raised of its own in ``text`` (its lines numbered from ``first``): a Python
    traceback ending in an error that no rule knows (no NCCL, connection, timeout, checkpoint... message) and that
    is not a launcher's or c10d's report of a failure elsewhere: "ValueError: labels must be in [0, 10)".  With
    ``in_user_code``, only one raised through a frame of the user's own code, and not a DataLoader worker's error
    whose own traceback was cut off ("Caught RuntimeError in DataLoader worker process 0." and nothing after)."""
    from nbhelpers.diagnosis.tracebacks import exceptions

    lines = text.splitlines()
    for rank, i, where in exceptions(text):
        if NOT_OWN.search(where.exc_type or ""):
            continue
        if in_user_code and (where.user is None or CAUGHT_IN_WORKER.search(where.message)):
            continue
        line = lines[i]
        st = _State()
        _scan((line + "\n").encode("utf-8", "replace"), 0, st)
        if st.hits:
            continue
        at = f" ({where.describe()})" if where.user else ""
        return Evidence(first + i, line.strip()[:480] + at, rank)
    return None


def _split_calls(st: _State, whole_log) -> None:
    """A collective timed out; did the ranks' last tracebacks end in different collectives (rank 0 in a broadcast,
    rank 1 in backward's gradient all_reduce)?  Then they were not in the same call: a collective one rank skipped
    or added (a rank whose peer gave up first fails in the call it had reached, which with the same code is the same
    one)."""
    from nbhelpers.diagnosis.tracebacks import exceptions

    text, first = st.tail_text()
    last = {rank: (i, where) for rank, i, where in exceptions(text) if rank is not None}
    calls = {r: w.collective for r, (_, w) in last.items() if w.collective and not w.collective.startswith("wait")}
    timed = [r for r in sorted(calls) if TIMED_OUT.search(last[r][1].message)]
    if len(set(calls.values())) >= 2 and timed:
        desc = ", ".join(f"rank {r} in {c}" for r, c in sorted(calls.items()))
        whole_log("collective_mismatch", first + last[timed[0]][0], f"the ranks' tracebacks end in different "
                  f"collectives ({desc}) and rank {timed[0]} timed out: they were not in the same call", timed[0])


def _unmet(st: _State, whole_log) -> None:
    """No rule fired; did the ranks fail to meet?  Two processes announcing the same global rank (Lightning's
    "GLOBAL_RANK: 0, MEMBER: 1/8" twice: both nodes were given ranks 0-3), a log that ends while fewer than the world
    have announced themselves, or an exception from init_process_group / the TCPStore that lost its connection."""
    twice = next((r for r, at in sorted(st.members.items()) if len(at) >= 2), None)
    text, first = st.tail_text()
    last = text.rstrip().rsplit("\n", 1)[-1]
    if twice is not None:
        whole_log("rendezvous_timeout", st.members[twice][1], f"two processes joined as global rank {twice} of "
                  f"{st.world}: the launcher gave two nodes the same ranks, so ranks up to {st.world - 1} never all meet")
    elif st.world and 2 <= len(st.members) < st.world and MEMBER.search(last):
        whole_log("rendezvous_timeout", max(at[-1] for at in st.members.values()), f"the log ends with "
                  f"{len(st.members)} of {st.world} processes joined: the others never came")
    elif b"Traceback" in st.tail and INIT_FRAME.search(text):
        from nbhelpers.diagnosis.tracebacks import exceptions

        lines = text.splitlines()
        for rank, i, where in exceptions(text):
            if INIT_LOST.search(lines[i]) and any(INIT_FRAME.search(f"{f.func} {f.code}") for f in where.frames):
                whole_log("rendezvous_timeout", first + i, f"{lines[i].strip()[:400]} (raised while the ranks met: "
                          f"{where.describe()})", rank)
                return


def _chunks(source: Iterable[str | bytes]) -> Iterator[bytes]:
    """Whole lines of UTF-8 in blocks of about CHUNK bytes, whatever the pieces' sizes and types."""
    buf: list[bytes] = []
    size = 0
    for piece in source:
        data = piece.encode("utf-8", "surrogatepass") if isinstance(piece, str) else piece
        buf.append(data)
        size += len(data)
        if size >= CHUNK:
            block = b"".join(buf)
            cut = block.rfind(b"\n") + 1
            if cut == 0:
                continue
            yield block[:cut]
            buf, size = [block[cut:]], len(block) - cut
    rest = b"".join(buf)
    if rest:
        yield rest if rest.endswith(b"\n") else rest + b"\n"


def classify_stream(source: Iterable[str | bytes], model: bool = True) -> list[Finding]:
    """Classify text arriving in pieces (str or UTF-8 bytes); memory stays bounded by the chunk size.
    With ``model``, the learned second opinion answers when no rule fires."""
    st = _State()
    base = 0
    for chunk in _chunks(source):
        if b"%20" in chunk:  # an error message pasted from a URL or an issue title: "undefined%20symbol:%20ncclX"
            chunk = URL_ESCAPE.sub(lambda m: bytes([int(m.group(1), 16)]), chunk)
        _scan(chunk, base, st)
        base = st.lines
        st.tail = (st.tail + chunk)[-TAIL_BYTES:]
    return _findings(st) or (_second_opinion(st) if model else [])


def _second_opinion(st: _State) -> list[Finding]:
    """No rule fired: the learned model's top label, when it is a failure and confident enough."""
    from nbhelpers.diagnosis import model

    text, first = st.tail_text()
    if not model.hard_errors(text):  # info and warning chatter is never a failure by itself
        return []
    label, p = model.predict(text, 1)[0]
    if label == "healthy" or p < model.MIN_CONFIDENCE or model.failure_probability(text) < model.MIN_FAILURE:
        return []
    lines = model.error_lines(text, MAX_EVIDENCE)
    numbered = {ln: i for i, ln in enumerate(text.splitlines(), first)}
    ev = [Evidence(next((n for t, n in numbered.items() if ln in t), st.lines), ln) for ln in lines]
    return [Finding(label, p, 0.0, ev, by="model")]


def top2_text(candidates: list[dict]) -> str:
    """``[Finding.candidate(), ...]`` as one line: "collective_timeout 0.82, worker_killed 0.58"."""
    return ", ".join(f"{c['category']} {c['confidence']:.2f}" for c in candidates[:2])


# What a context rule's lines mean when no error came with them: set-up that is harmless in a healthy run and the
# usual cause when the same job hangs or fails (shown as a hint, never as a finding).
HINT_NEEDLE_WHY = {  # a rule whose lines mean something else than its category's set-up hint
    "cannot be initialized": "c10d could not open an IPv6 socket (errno 97: IPv6 is off here) and went on with IPv4: "
                             "harmless by itself; if ranks on several hosts do not meet, check the address they use "
                             "(MASTER_ADDR) resolves to an IPv4 address they can all reach.",
}
HINT_WHY = {
    "network_interface": "NCCL or Gloo picked an address other hosts may not reach (loopback, a container bridge or "
                         "veth, a link-local address: IPv6 fe80:: or 169.254.x.x). Harmless when every rank is on "
                         "this host; if ranks on several hosts hang or fail at start-up, this is the first thing to fix.",
    "rendezvous_timeout": "Ranks were still waiting for their peers to join. Normal for a while at start-up; if it "
                          "repeats until a timeout, a rank never joined.",
    "infiniband": "NCCL's InfiniBand transport returned an error code here; the error line itself is not in this "
                  "text (paste the lines above the trace).",
}


def hints(text: str) -> list[dict]:
    """Set-up lines worth a look that are not a failure by themselves (an interface other hosts cannot reach, ranks
    waiting to join): the categories only context rules found, each with its lines, what they mean and what to do.
    The classifier counts them only next to an error they explain; with no error they are hints."""
    st = _State()
    _scan((text if text.endswith("\n") else text + "\n").encode(), 0, st)
    found = {f.category for f in _findings(st)}
    why = {c: next((HINT_NEEDLE_WHY[r.needle] for r in h if r.needle in HINT_NEEDLE_WHY), None) for c, h in st.hits.items()}
    return [{"category": c, "title": CATEGORIES[c].title, "why": why[c] or HINT_WHY.get(c, CATEGORIES[c].explanation),
             "evidence": [str(e) for e in _evidence(st, c)], "remedy": CATEGORIES[c].remedies[0]}
            for c, h in st.hits.items() if c not in found and all(r.context or r.hint for r in h)]


def second_opinion(text: str) -> dict:
    """What to say when nothing is confident: the model's two likeliest labels with their probabilities, the
    lines that look like the error, the closest known cases (id, source, label), set-up lines worth a look
    (:func:`hints`), and what to run next (first what to try if the likeliest label is right)."""
    from nbhelpers.diagnosis import model

    top2 = model.predict(text, 2)
    likely = [f"if it is {CATEGORIES[c].title.lower()} ({p:.2f}): {CATEGORIES[c].remedies[0]}"
              for c, p in top2[:1] if c in CATEGORIES]
    return {"top2": top2, "error_lines": model.error_lines(text), "closest": model.closest(text),
            "hints": hints(text),
            "next": likely + ["python -m nbhelpers run --nproc N train.py: the culprit rank and line from a real run "
                              "(notebook 06)", "the staged probe on the same nodes: which stage fails (notebook 01)",
                              "TORCH_DISTRIBUTED_DEBUG=DETAIL for a collective mismatch (not with DDP on gloo)",
                              "NCCL_DEBUG=INFO for NCCL errors (notebook 02)"]}


def classify(text: str, model: bool = True) -> list[Finding]:
    return classify_stream([text], model)


def classify_file(path: str | os.PathLike) -> list[Finding]:
    with open(path, "rb") as fh:
        return classify_stream(iter(lambda: fh.read(CHUNK), b""))


def classify_logs(logs: dict[int, str], extra: str = "", model: bool = False) -> list[Finding]:
    """Classify per-rank logs together (each line tagged with its rank), plus e.g. torchrun's own log.  The rules
    only, by default: a run the workbook watched has its culprit rules, which read more than the text."""
    buf = io.StringIO()
    for rank, text in logs.items():
        tag = f"[rank{rank}]"
        for line in text.splitlines():
            buf.write(line + "\n" if line.startswith(tag) else f"{tag}: {line}\n")
    buf.write(extra)
    return classify(buf.getvalue(), model)


def _score(hits: dict[Rule, int]) -> float:
    return sum(r.weight * (1 + 0.25 * min(n - 1, 4)) for r, n in hits.items())


def _findings(st: _State) -> list[Finding]:
    if max(st.waits.values(), default=0) >= STUCK_AFTER:
        st.hits["rendezvous_timeout"][STUCK_BARRIER] = 1
    # the categories of real errors
    real = {c for c, h in st.hits.items() if any(not (r.context or r.alone or r.hint) for r in h)}
    anchored, explained = bool(real), bool(real & CONNECTION)

    def counted(c: str, r: Rule) -> bool:
        # context rules (interface lists, ...) count only next to a real error they can explain, not next to a report
        # of one; a launcher's report of some failure ("alone") counts only where no other category has a real error
        return (explained or not r.context) and not (r.alone and real - {c}) and not r.hint

    scores = {c: _score({r: n for r, n in h.items() if counted(c, r)}) for c, h in st.hits.items()}

    def whole_log(category: str, line: int, text: str, rank: int | None = None) -> None:  # of the whole log, worth 7
        scores[category] = scores.get(category, 0) + 7
        st.evidence.setdefault(category, []).insert(0, Evidence(line, text, rank))
        st.first_line.setdefault(category, line)

    if anchored and len(st.nccl_versions) >= 2:
        whole_log("version_mismatch", min(st.nccl_versions.values()),
                  f"two NCCL versions in one job: {', '.join(sorted(st.nccl_versions))}")
    if len(set(st.seq_numbers.values())) >= 2:
        desc = ", ".join(f"rank {r}: {s}" for r, s in sorted(st.seq_numbers.items()))
        whole_log("collective_mismatch", st.seq_line or 1, f"ranks are at different collective sequence numbers ({desc})")
    split = next(((seq, ops) for (_, seq), ops in st.work_ops.items() if len(ops) >= 2), None)
    if split:
        seq, ops = split
        whole_log("collective_mismatch", min(ops.values()), f"ranks timed out at the same collective (SeqNum={seq}) in "
                  f"different operations: {', '.join(sorted(ops))}")
    sized = next(((pg, seq, op, sizes) for (pg, seq, op), by_rank in st.work_sizes.items()
                  if len(sizes := {next(iter(n)) for n in by_rank.values() if len(n) == 1}) >= 2), None)
    if sized and not split:  # each rank one size, and the ranks disagree (a rank with several may be in several groups)
        pg, seq, op, sizes = sized
        whole_log("collective_mismatch", st.work_ops[(pg, seq)][op], f"ranks timed out in the same {op} (SeqNum={seq}) "
                  f"with different sizes: NumelIn {', '.join(map(str, sorted(sizes)))}")
    if st.coll_split:
        line, count_, shown = st.coll_split
        whole_log("collective_mismatch", line, f"processes called different collectives at NCCL opCount {count_}: "
                  f"{'; '.join(shown)}")
    if "collective_timeout" in scores and b"Traceback" in st.tail:
        _split_calls(st, whole_log)
    scores = {c: s for c, s in scores.items() if s > 0}
    # only what peers and launchers report after a rank failed: a rank's own exception in the log is the cause
    reported = [c for c in scores if c not in CONSEQUENCE and not (
        c == "worker_killed" and all(r in PEER_REPORTS for r in st.hits[c] if counted(c, r)))]
    own = None
    if scores and not reported and b"Traceback" in st.tail:
        own = _own_error(*st.tail_text())
        if own:
            whole_log("rank_error", own.line, own.text, own.rank)
    if not scores:
        _unmet(st, whole_log)
        scores = {c: s for c, s in scores.items() if s > 0}
    if not scores and b"Traceback" in st.tail:  # no rule knows it, but a rank raised it in the user's own code
        own = _own_error(*st.tail_text(), in_user_code=True)
        if own:
            whole_log("rank_error", own.line, own.text, own.rank)
    if not scores:
        return []
    # a category that only "alone" rules found (a launcher's report of whatever failed) yields to any other finding
    lone = {c for c in scores if c in st.hits and all(r.alone for r in st.hits[c])}
    if len(lone) < len(scores):
        scores = {c: s for c, s in scores.items() if c not in lone}
    consequences = set(CONSEQUENCE)
    if own:  # the peers' lost connections and the launcher's report follow from the rank's own error
        consequences.add("worker_killed")
    killed = [r for r in st.hits.get("worker_killed", {}) if counted("worker_killed", r)]
    if killed and scores.keys() & {"collective_timeout", "rendezvous_timeout"} and \
            all(r.needle in PEER_GONE_NEEDLES for r in killed):
        # only "connection closed by peer": a rank that timed out (in a collective, or waiting for a store key) and
        # exited closes its peers' connections, so here the lost peer is a consequence of the timeout, not a killed
        # rank (notebook 04)
        consequences.add("worker_killed")
    if killed and "exit_without_destroy" in scores and all(r in TEARDOWN_SIGNAL_RULES for r in killed):
        # a rank that aborted at exit ("terminate called without an active exception") is reported by torchrun as
        # "Signal 6 (SIGABRT)" or, when faulthandler crashed dumping it, "Signal 11 (SIGSEGV) received by PID":
        # here the abort at exit is the cause, the signal its report
        consequences.add("worker_killed")
        consequences.discard("exit_without_destroy")
    strong_cause = any(s >= 4 and c not in consequences for c, s in scores.items())

    def rank_key(c: str) -> tuple:  # a well-evidenced cause comes before every consequence, however loud
        return (strong_cause and c in consequences, -scores[c], st.first_line.get(c, 0))

    order = sorted(scores, key=rank_key)
    top = scores[order[0]]
    out = []
    for i, c in enumerate(order):
        s = scores[c]
        conf = min(0.97, 0.35 + 0.06 * s)
        rivals = [scores[o] for o in order[1:] if not (strong_cause and o in consequences)]
        if i == 0 and rivals:  # a cause is not made less sure by the louder timeouts it explains
            conf *= 0.75 + 0.25 * min(1.0, (top - rivals[0]) / top + 0.5)
        elif i > 0:
            conf *= 0.6
        out.append(Finding(c, conf, s, _evidence(st, c)))
    return out
