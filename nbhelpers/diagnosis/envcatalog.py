"""The environment variables that matter when distributed PyTorch training fails, and the wrong ones.

What this catalog reflects (checked 2026-11; re-check when NCCL or PyTorch is upgraded):

* NCCL: the "Environment Variables" page of the NCCL user guide (the current page, NCCL 2.30, whose
  version notes cover the 2.2x series: defaults that changed, e.g. NCCL_IB_TIMEOUT, are noted), plus
  NCCL's ``src/debug.cc`` (NCCL_DEBUG / NCCL_DEBUG_SUBSYS values), ``src/misc/param.cc`` (integers
  are read with ``strtoll``) and ``src/misc/socket.cc`` (the socket parameters that exist).
* PyTorch 2.13 (the version this project pins): the names declared in
  ``torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp`` and ``FlightRecorder.hpp`` as installed, the
  parsers in ``Utils.hpp`` (``getCvarBool``/``getCvarInt``/``getCvarString``), defaults from
  ``ProcessGroupNCCL.cpp``, and the docs pages ``torch_nccl_environment_variables``,
  ``debugging_environment_variables`` and ``cuda_environment_variables``.

Deprecated PyTorch names: ``getCvar*`` takes a list ``{NEW, OLD, ...}``, warns "Environment variable
OLD is deprecated; use NEW instead" when OLD is set, and reads the list from the end, so NEW wins
when both are set.  Several defaults changed within PyTorch 2.x; ``default`` is the 2.13 value and
``default_note`` says what it was before.

A variable is left out when its name or meaning could not be confirmed in those sources.  Importing
this module has no side effects and imports neither torch nor pandas.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

VarType = Literal["bool", "int", "enum", "list", "str", "ifname", "port"]

# Sources.
NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
NCCL_DEBUG_CC = "https://github.com/NVIDIA/nccl/blob/master/src/debug.cc"
NCCL_SOCKET_CC = "https://github.com/NVIDIA/nccl/blob/master/src/misc/socket.cc"
_C10D = "https://github.com/pytorch/pytorch/blob/main/torch/csrc/distributed/c10d/"
PG_NCCL_HPP = _C10D + "ProcessGroupNCCL.hpp"
PG_NCCL_CPP = _C10D + "ProcessGroupNCCL.cpp"
FLIGHT_RECORDER_HPP = _C10D + "FlightRecorder.hpp"
FLIGHT_RECORDER_CPP = _C10D + "FlightRecorder.cpp"
GLOO_DEVICE_FACTORY = _C10D + "GlooDeviceFactory.cpp"
C10D_DEBUG_CPP = _C10D + "debug.cpp"
TORCH_NCCL_DOCS = "https://docs.pytorch.org/docs/stable/torch_nccl_environment_variables.html"
TORCH_DEBUG_DOCS = "https://docs.pytorch.org/docs/stable/debugging_environment_variables.html"
TORCH_CUDA_ENV_DOCS = "https://docs.pytorch.org/docs/stable/cuda_environment_variables.html"
TORCH_DIST_DOCS = "https://docs.pytorch.org/docs/stable/distributed.html"
TORCHRUN_DOCS = "https://docs.pytorch.org/docs/stable/elastic/run.html"
TORCHRUN_PY = "https://github.com/pytorch/pytorch/blob/main/torch/distributed/run.py"
DYNAMIC_RDZV_PY = ("https://github.com/pytorch/pytorch/blob/main/torch/distributed/elastic/rendezvous/"
                   "dynamic_rendezvous.py")
DIST_CONFIG_PY = "https://github.com/pytorch/pytorch/blob/main/torch/distributed/config.py"
CUDA_ENV_DOCS = ("https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/"
                 "environment-variables.html")
GLOO_REPO = "https://github.com/pytorch/gloo"
ACCELERATE_STATE_PY = "https://github.com/huggingface/accelerate/blob/main/src/accelerate/state.py"

# Accepted spellings of booleans, by parser.
NCCL_BOOL = ("0", "1")  # NCCL documents 0/1 ("define and set to 1")
CHECK_ENV_BOOL = ("0", "1")  # c10::utils::check_env: warns and ignores anything else
CVAR_BOOL = ("0", "1", "y", "yes", "t", "true", "n", "no", "f", "false")  # getCvarBool, case-insensitive
NCCL_PATH_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")
NCCL_DEBUG_SUBSYSTEMS = ("INIT", "COLL", "P2P", "SHM", "NET", "GRAPH", "TUNING", "ENV", "ALLOC", "ALLOC_HOST",
                         "CALL", "PROXY", "NVLS", "BOOTSTRAP", "REG", "PROFILE", "RAS", "DESTROY", "ALL")


@dataclass(frozen=True)
class EnvVar:
    """One variable: what it means, what it accepts, where that is written down."""

    name: str
    type: VarType
    meaning: str
    source: str
    default: str | None = None  # the value in effect when unset (None: unset means "not used" or "auto")
    default_note: str = ""  # the default in words, older defaults, platform differences
    allowed: tuple[str, ...] = ()  # enum values, list tokens, or the accepted spellings of a bool
    case_sensitive: bool = True
    allow_int: bool = False  # an enum that also takes (legacy) integers, e.g. NCCL_P2P_LEVEL
    minimum: int | None = None
    maximum: int | None = None
    deprecated_alias_of: str | None = None  # on an old name: the name to use instead
    both_set: str = ""  # on an old name: what happens when old and new are both set
    debug_only: bool = False  # a debugging setting: NCCL's "Debugging" section, or costly diagnostics
    debug_values: tuple[str, ...] = ()  # values that count as "left on"; () = any value (bools: any true)
    debug_level: Literal["info", "warning"] = "info"
    debug_why: str = ""
    obsolete: str = ""  # set when setting it no longer does anything useful: why
    on_bad_value: str = ""  # what the reader does with a value it cannot parse
    note: str = ""


@dataclass(frozen=True)
class WrongName:
    """A name copied from bad advice (or one NCCL retired), with what to use instead."""

    name: str
    why: str
    instead: str
    source: str
    retired: bool = False  # True: it existed once and was renamed/removed; False: it never existed


def _entries(*items: EnvVar) -> dict[str, EnvVar]:
    out: dict[str, EnvVar] = {}
    for item in items:
        if item.name in out:
            raise ValueError(f"duplicate catalog entry {item.name}")
        out[item.name] = item
    return out


def _alias(old: str, new: EnvVar, source: str, both_set: str, note: str = "") -> EnvVar:
    """An old name that is still read, with the new entry's type and values."""
    return replace(new, name=old, source=source, deprecated_alias_of=new.name, both_set=both_set,
                   meaning=f"Deprecated name of {new.name}: {new.meaning[0].lower()}{new.meaning[1:]}",
                   note=note, obsolete="")


_TORCH_WINS = ("{new} wins: PyTorch reads [{new}, {old}] from the end, so the new name overrides the old "
               "one (and warns that {old} is deprecated).")


def _torch_alias(old: str, new: EnvVar, source: str = PG_NCCL_HPP) -> EnvVar:
    return _alias(old, new, source, _TORCH_WINS.format(new=new.name, old=old),
                  note="PyTorch 2.13 still reads it and warns 'Environment variable "
                       f"{old} is deprecated; use {new.name} instead'.")


# ---------------------------------------------------------------- NCCL: logging
_NCCL_DEBUG = EnvVar(
    "NCCL_DEBUG", "enum", "How much NCCL logs: VERSION, WARN (errors), INFO (every init step) or TRACE.",
    NCCL_ENV, default=None, default_note="unset: NCCL prints nothing", allowed=("VERSION", "WARN", "INFO",
                                                                                 "ABORT", "TRACE"),
    case_sensitive=False, debug_only=True, debug_values=("INFO", "TRACE"),
    debug_why="INFO logs every initialisation step and TRACE (which needs an NCCL built with TRACE=1) "
              "every call: both slow start-up and flood the logs. Fine while debugging; WARN is enough "
              "in production.",
    note="ABORT is accepted by NCCL's parser (src/debug.cc) but not documented on the env page.")
_NCCL_DEBUG_SUBSYS = EnvVar(
    "NCCL_DEBUG_SUBSYS", "list", "Which subsystems NCCL_DEBUG=INFO logs, as a comma-separated list; "
    "a leading ^ on a name turns that subsystem off.", NCCL_ENV, default="INIT,BOOTSTRAP,ENV",
    allowed=NCCL_DEBUG_SUBSYSTEMS, case_sensitive=False, debug_only=True, debug_values=("ALL",),
    debug_why="ALL logs every subsystem, collectives and calls included: very verbose and slow. Narrow it "
              "(e.g. INIT,NET) once you know where to look.",
    note="ALLOC_HOST and DESTROY are recent (NCCL 2.30 docs); older NCCL ignores names it does not know.")
_NCCL_DEBUG_FILE = EnvVar(
    "NCCL_DEBUG_FILE", "str", "File NCCL writes its debug log to instead of stdout; %h becomes the host "
    "name and %p the PID.", NCCL_ENV, default=None, default_note="stdout",
    note="Use %h and %p: ranks that share one file name overwrite each other's log.")

# ---------------------------------------------------------------- NCCL: sockets
_NCCL_SOCKET_IFNAME = EnvVar(
    "NCCL_SOCKET_IFNAME", "ifname", "Which IP interfaces NCCL uses for bootstrap and socket traffic: "
    "comma-separated name prefixes, = for exact names, ^ to exclude.", NCCL_ENV, default=None,
    default_note="auto: prefers ib*, avoids lo and docker* unless nothing else is up")
_NCCL_SOCKET_FAMILY = EnvVar(
    "NCCL_SOCKET_FAMILY", "enum", "Forces NCCL to use only IPv4 (AF_INET) or only IPv6 (AF_INET6) "
    "interfaces.", NCCL_ENV, allowed=("AF_INET", "AF_INET6"), case_sensitive=False)
_NCCL_SOCKET_NTHREADS = EnvVar(
    "NCCL_SOCKET_NTHREADS", "int", "CPU helper threads per network connection of the socket transport.",
    NCCL_ENV, default="1", default_note="1; 2 on AWS, 4 on Google Cloud gVNIC", minimum=1, maximum=16,
    note="NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD may not exceed 64.")
_NCCL_NSOCKS_PERTHREAD = EnvVar(
    "NCCL_NSOCKS_PERTHREAD", "int", "Sockets opened by each helper thread of the socket transport.",
    NCCL_ENV, default="1", default_note="1; 8 on AWS", minimum=1,
    note="NCCL_SOCKET_NTHREADS * NCCL_NSOCKS_PERTHREAD may not exceed 64.")
_NCCL_SOCKET_RETRY_CNT = EnvVar(
    "NCCL_SOCKET_RETRY_CNT", "int", "How often NCCL retries a socket connection after ETIMEDOUT, "
    "ECONNREFUSED or EHOSTUNREACH (since NCCL 2.24).", NCCL_ENV, default="34", minimum=1,
    note="With NCCL_SOCKET_RETRY_SLEEP_MSEC=100 the retries last about 60 s in total.")
_NCCL_SOCKET_RETRY_SLEEP_MSEC = EnvVar(
    "NCCL_SOCKET_RETRY_SLEEP_MSEC", "int", "Milliseconds NCCL waits before the first socket connection "
    "retry; later waits grow linearly (since NCCL 2.24).", NCCL_ENV, default="100", minimum=1)

# ---------------------------------------------------------------- NCCL: InfiniBand / RoCE
_NCCL_IB_DISABLE = EnvVar(
    "NCCL_IB_DISABLE", "bool", "1 stops NCCL from using InfiniBand/RoCE verbs; it falls back to IP "
    "sockets.", NCCL_ENV, default="0", allowed=NCCL_BOOL, debug_only=True, debug_level="warning",
    debug_why="NCCL lists it under Debugging. Traffic moves to TCP sockets (much slower) and the real IB "
              "problem (link down, wrong HCA or GID index) stays hidden: use it to confirm IB is at "
              "fault, then fix IB and remove it.")
_NCCL_IB_HCA = EnvVar(
    "NCCL_IB_HCA", "str", "Which RDMA adapters (HCAs) and ports NCCL uses: comma-separated "
    "<hca>[:<port>] prefixes, = for exact names, ^ to exclude.", NCCL_ENV,
    note="Without =, mlx5_1 also selects mlx5_10 to mlx5_19.")
_NCCL_IB_TIMEOUT = EnvVar(
    "NCCL_IB_TIMEOUT", "int", "InfiniBand verbs timeout exponent: each attempt waits 4.096 us * "
    "2^value.", NCCL_ENV, default="20", default_note="20 since NCCL 2.23 (18 from 2.14, 14 before)",
    minimum=0, maximum=31,
    note="0 or >= 32 means an infinite timeout; the wait before an error is this times NCCL_IB_RETRY_CNT "
         "(about 30 s with the defaults). It is not the collective timeout.")
_NCCL_IB_RETRY_CNT = EnvVar(
    "NCCL_IB_RETRY_CNT", "int", "InfiniBand retry count per operation.", NCCL_ENV, default="7",
    minimum=0, maximum=7)
_NCCL_IB_GID_INDEX = EnvVar(
    "NCCL_IB_GID_INDEX", "int", "Global ID index used in RoCE mode (see show_gids).", NCCL_ENV,
    default="-1", default_note="-1: NCCL picks one (since 2.21, guided by NCCL_IB_ADDR_FAMILY, "
                               "NCCL_IB_ADDR_RANGE and NCCL_IB_ROCE_VERSION_NUM)", minimum=-1)
_NCCL_IB_TC = EnvVar("NCCL_IB_TC", "int", "InfiniBand traffic class field.", NCCL_ENV, default="0",
                     minimum=0)
_NCCL_IB_SL = EnvVar("NCCL_IB_SL", "int", "InfiniBand service level.", NCCL_ENV, default="0", minimum=0)

# ---------------------------------------------------------------- NCCL: network selection and topology
_NCCL_NET = EnvVar(
    "NCCL_NET", "str", "Forces the network module NCCL uses: IB, Socket, or an external plugin's name "
    "(case-insensitive).", NCCL_ENV, default=None, default_note="unset: NCCL picks the best module",
    note="Useful to make sure a plugin is used instead of a silent fall-back to IB or sockets.")
_NCCL_NET_GDR_LEVEL = EnvVar(
    "NCCL_NET_GDR_LEVEL", "enum", "Largest NIC-to-GPU distance at which NCCL uses GPUDirect RDMA: LOC, "
    "PIX, PXB, PHB or SYS.", NCCL_ENV, default=None, default_note="unset: NCCL decides from the topology",
    allowed=NCCL_PATH_LEVELS[:1] + NCCL_PATH_LEVELS[2:], case_sensitive=False, allow_int=True,
    debug_only=True, debug_why="NCCL lists it under Debugging: forcing it overrides NCCL's own choice. Fine "
                               "for an experiment; remove it once the problem is understood.",
    note="Formerly NCCL_IB_GDR_LEVEL (renamed in NCCL 2.4.0). Legacy integers 0-4 still work but are "
         "discouraged.")
_NCCL_CROSS_NIC = EnvVar(
    "NCCL_CROSS_NIC", "enum", "Whether rings/trees may use different NICs on different nodes: 0 never, "
    "1 allowed, 2 only when faster.", NCCL_ENV, default="2", allowed=("0", "1", "2"),
    note="Depends on whether the fabric is rail-optimised; no effect with one NIC per node.")
_NCCL_TOPO_FILE = EnvVar(
    "NCCL_TOPO_FILE", "str", "XML topology file NCCL loads before detecting the topology.", NCCL_ENV,
    default=None, default_note="/var/run/nvidia-topologyd/virtualTopology.xml if present")

# ---------------------------------------------------------------- NCCL: "Debugging" section
_NCCL_P2P_DISABLE = EnvVar(
    "NCCL_P2P_DISABLE", "bool", "1 turns off the peer-to-peer transport (direct GPU-to-GPU access over "
    "NVLink or PCIe).", NCCL_ENV, default="0", allowed=NCCL_BOOL, debug_only=True, debug_level="warning",
    debug_why="NCCL lists it under Debugging. Intra-node traffic then goes through host memory or the "
              "network, much slower; it often 'fixes' hangs caused by broken P2P (IOMMU/ACS, "
              "virtualised PCIe, driver) and so hides them.")
_NCCL_P2P_LEVEL = EnvVar(
    "NCCL_P2P_LEVEL", "enum", "Largest GPU-to-GPU distance at which NCCL uses P2P: LOC, NVL, PIX, PXB, "
    "PHB or SYS.", NCCL_ENV, default=None, default_note="unset: NCCL decides from the topology",
    allowed=NCCL_PATH_LEVELS, case_sensitive=False, allow_int=True, debug_only=True,
    debug_why="NCCL lists it under Debugging: forcing it overrides NCCL's own choice. Fine for an "
              "experiment; remove it once the problem is understood.",
    note="Legacy integers 0-4 still work but are discouraged (values above 4 mean SYS).")
_NCCL_SHM_DISABLE = EnvVar(
    "NCCL_SHM_DISABLE", "bool", "1 turns off the shared-memory transport used between GPUs that cannot "
    "use P2P.", NCCL_ENV, default="0", allowed=NCCL_BOOL, debug_only=True, debug_level="warning",
    debug_why="NCCL lists it under Debugging. Traffic goes over the network instead (slower); it is "
              "usually set to dodge a too-small /dev/shm in a container: raise --shm-size instead.")
_NCCL_BUFFSIZE = EnvVar(
    "NCCL_BUFFSIZE", "int", "Size in bytes of the buffer NCCL uses between each pair of GPUs.", NCCL_ENV,
    default="4194304", minimum=1, debug_only=True,
    debug_why="NCCL lists it under Debugging: a fixed value stops newer NCCL picking a better one.")
_NCCL_ALGO = EnvVar(
    "NCCL_ALGO", "str", "Which algorithms NCCL may use (Ring, Tree, CollnetDirect, CollnetChain, NVLS, "
    "NVLSTree, PAT); a leading ^ excludes.", NCCL_ENV, default=None,
    default_note="unset: chosen from topology and architecture", debug_only=True,
    debug_why="NCCL lists it under Debugging: forcing an algorithm can cost speed or fail when it is not "
              "available (since 2.24 NCCL no longer falls back to Ring).",
    note="Since NCCL 2.24 it also takes per-collective settings such as 'allreduce:tree;broadcast:ring'.")
_NCCL_PROTO = EnvVar(
    "NCCL_PROTO", "str", "Which protocols NCCL may use (LL, LL128, Simple); a leading ^ excludes.",
    NCCL_ENV, default=None, default_note="unset: every protocol the platform supports", debug_only=True,
    debug_why="NCCL lists it under Debugging and discourages it except to switch off a protocol suspected "
              "of a bug; forcing LL128 where unsupported can corrupt data.")
_NCCL_MIN_CTAS = EnvVar(
    "NCCL_MIN_CTAS", "int", "Minimum number of CTAs (channels) NCCL uses (since 2.17).", NCCL_ENV,
    minimum=1, maximum=64, debug_only=True,
    debug_why="NCCL lists it under Debugging: mostly for benchmarks; more CTAs can slow small messages.")
_NCCL_MAX_CTAS = EnvVar(
    "NCCL_MAX_CTAS", "int", "Maximum number of CTAs (channels) NCCL uses (since 2.17).", NCCL_ENV,
    minimum=1, maximum=64, debug_only=True,
    debug_why="NCCL lists it under Debugging: capping CTAs can cap bandwidth.")
_NCCL_MIN_NCHANNELS = replace(
    _NCCL_MIN_CTAS, name="NCCL_MIN_NCHANNELS", meaning="Minimum number of channels NCCL uses (deprecated "
    "in NCCL 2.17 in favour of NCCL_MIN_CTAS).", maximum=None, deprecated_alias_of="NCCL_MIN_CTAS",
    both_set="NCCL uses the higher of the two values.")
_NCCL_MAX_NCHANNELS = replace(
    _NCCL_MAX_CTAS, name="NCCL_MAX_NCHANNELS", meaning="Maximum number of channels NCCL uses (deprecated "
    "in NCCL 2.17 in favour of NCCL_MAX_CTAS).", maximum=None, deprecated_alias_of="NCCL_MAX_CTAS",
    both_set="NCCL uses the lower of the two values.")
_NCCL_CUMEM_ENABLE = EnvVar(
    "NCCL_CUMEM_ENABLE", "bool", "Whether NCCL allocates its memory with the CUDA cuMem* API.", NCCL_ENV,
    default=None, default_note="auto since 2.19 (on where supported); 0 in 2.18", allowed=NCCL_BOOL,
    debug_only=True, debug_values=("0", "1"),
    debug_why="NCCL lists it under Debugging: forcing it overrides the auto-detection.")
_NCCL_NVLS_ENABLE = EnvVar(
    "NCCL_NVLS_ENABLE", "enum", "NVLink SHARP: 0 off, 1 or 2 on where supported (since 2.17).", NCCL_ENV,
    default="2", allowed=("0", "1", "2"), debug_only=True, debug_values=("0", "1"),
    debug_why="NCCL lists it under Debugging: forcing it overrides NCCL's own choice.")
_NCCL_LAUNCH_MODE = EnvVar(
    "NCCL_LAUNCH_MODE", "enum", "How NCCL launches its CUDA kernels: PARALLEL or GROUP.", NCCL_ENV,
    default="PARALLEL", allowed=("PARALLEL", "GROUP"), case_sensitive=False, debug_only=True,
    debug_values=("GROUP",), debug_why="NCCL lists it under Debugging; GROUP is deprecated since NCCL 2.9.")

# ---------------------------------------------------------------- PyTorch ProcessGroupNCCL
_ASYNC = EnvVar(
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "enum", "What the NCCL watchdog does when a collective fails or "
    "times out: 0 nothing, 1 abort the communicator and kill the process, 2 only abort, 3 kill the "
    "process without aborting.", PG_NCCL_HPP, default="3", allowed=("0", "1", "2", "3"),
    note="torchrun's local agent sets it to 1 for its workers when it is unset "
         "(torch/distributed/elastic/agent/server/local_elastic_agent.py); documented on " + TORCH_NCCL_DOCS)
_BLOCKING = EnvVar(
    "TORCH_NCCL_BLOCKING_WAIT", "bool", "1 makes wait() block the calling thread and raise after the "
    "process-group timeout; no watchdog thread is started then.", PG_NCCL_HPP, default="0",
    allowed=CVAR_BOOL, case_sensitive=False,
    on_bad_value="getCvarBool raises 'Invalid value for environment variable' when the process group is "
                 "created.")
_DESYNC = EnvVar(
    "TORCH_NCCL_DESYNC_DEBUG", "bool", "1 makes the watchdog report, on a timeout, which rank fell "
    "behind or ran a different collective.", PG_NCCL_HPP, default="0", allowed=CVAR_BOOL,
    case_sensitive=False, debug_only=True,
    debug_why="Desync debugging also turns on per-collective timing events (extra CUDA events on every call). Useful to "
              "name the rank that fell behind; TORCH_DISTRIBUTED_DEBUG=DETAIL turns it on too.",
    on_bad_value=_BLOCKING.on_bad_value)
_TIMING = EnvVar(
    "TORCH_NCCL_ENABLE_TIMING", "bool", "1 records a start event for every NCCL collective so each one "
    "is timed exactly.", PG_NCCL_HPP, default="0", allowed=CVAR_BOOL, case_sensitive=False,
    debug_only=True, debug_why="The header warns it can make a watchdog hang more likely (the watchdog "
                               "queries CUDA events). Fine for profiling; turn it off afterwards.",
    on_bad_value=_BLOCKING.on_bad_value)
_TRACE_BUFFER = EnvVar(
    "TORCH_NCCL_TRACE_BUFFER_SIZE", "int", "How many events the flight recorder keeps per rank; 0 turns it "
    "off.", PG_NCCL_HPP, default="2000", default_note="2000 in PyTorch 2.13; 0 (off) in older 2.x",
    minimum=0, on_bad_value="getCvarInt (std::stoi) keeps the leading digits and raises if there are none.",
    note="PyTorch 2.13's Flight Recorder also reads TORCH_FR_BUFFER_SIZE and warns that this name is "
         "deprecated, while ProcessGroupNCCL itself still reads this name: set both to the same value.")
_FR_BUFFER = EnvVar(
    "TORCH_FR_BUFFER_SIZE", "int", "How many events the flight recorder keeps per rank; 0 turns it off.",
    FLIGHT_RECORDER_HPP, default="2000", minimum=0, on_bad_value=_TRACE_BUFFER.on_bad_value,
    note="Newer name read by the Flight Recorder of PyTorch 2.13 before TORCH_NCCL_TRACE_BUFFER_SIZE.")
_DUMP = EnvVar(
    "TORCH_NCCL_DUMP_ON_TIMEOUT", "bool", "1 makes every rank dump its flight-recorder trace when a "
    "collective times out or fails.", PG_NCCL_HPP, default="1",
    default_note="1 in recent PyTorch; 0 in older 2.x", allowed=CVAR_BOOL, case_sensitive=False,
    on_bad_value=_BLOCKING.on_bad_value,
    note="Needs a flight-recorder buffer (TORCH_NCCL_TRACE_BUFFER_SIZE > 0); files go to "
         "TORCH_FR_DUMP_TEMP_FILE.")
_HEARTBEAT = EnvVar(
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "int", "Seconds without a watchdog heartbeat after which the "
    "monitor thread kills the process.", PG_NCCL_HPP, default="480",
    default_note="480 in recent PyTorch; 600 in older 2.x", minimum=1,
    on_bad_value=_TRACE_BUFFER.on_bad_value,
    note="This watches the watchdog thread itself; the collective timeout is "
         "init_process_group(timeout=...).")
_MONITORING = EnvVar(
    "TORCH_NCCL_ENABLE_MONITORING", "bool", "1 starts the monitor thread that kills a process whose NCCL "
    "watchdog stopped making progress.", PG_NCCL_HPP, default="1", allowed=CVAR_BOOL, case_sensitive=False,
    on_bad_value=_BLOCKING.on_bad_value)
_WAIT_DUMP = EnvVar(
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "int", "Extra milliseconds a failing rank waits for the "
    "debug dump before it exits.", PG_NCCL_HPP, default="15000",
    default_note="15000 in recent PyTorch; other values in older 2.x", minimum=0,
    on_bad_value=_TRACE_BUFFER.on_bad_value)
_COORD = EnvVar(
    "TORCH_NCCL_COORD_CHECK_MILSEC", "int", "How often (ms) the monitor thread checks the store for a "
    "dump signal from other ranks.", PG_NCCL_HPP, default="1000", minimum=1,
    on_bad_value=_TRACE_BUFFER.on_bad_value)
_AVOID_RECORD = EnvVar(
    "TORCH_NCCL_AVOID_RECORD_STREAMS", "bool", "1 keeps tensors alive by stashing references instead of "
    "calling recordStream.", PG_NCCL_HPP, default="0", allowed=CVAR_BOOL, case_sensitive=False,
    obsolete="Recent PyTorch does this by default and only warns 'TORCH_NCCL_AVOID_RECORD_STREAMS is the "
             "default now, this environment variable is thus deprecated' when it is set.",
    on_bad_value=_BLOCKING.on_bad_value)
_NONBLOCKING = EnvVar(
    "TORCH_NCCL_USE_COMM_NONBLOCKING", "bool", "1 creates NCCL communicators in non-blocking mode, 0 in "
    "blocking mode.", TORCH_CUDA_ENV_DOCS, default=None,
    default_note="unset: blocking; a blocking setting in ProcessGroupNCCL.Options wins over this variable",
    allowed=CHECK_ENV_BOOL, on_bad_value="c10::utils::check_env warns and ignores anything but 0 or 1.")
_FR_DUMP_FILE = EnvVar(
    "TORCH_FR_DUMP_TEMP_FILE", "str", "Path prefix of the flight-recorder dump files; the rank number is "
    "appended.", FLIGHT_RECORDER_CPP, default=None,
    default_note="$XDG_CACHE_HOME (or ~/.cache)/torch/comm_lib_trace_rank_ in PyTorch 2.13")
_FR_CPP_STACK = EnvVar(
    "TORCH_FR_CPP_STACK", "bool", "1 records C++ stack traces in flight-recorder entries.",
    FLIGHT_RECORDER_HPP, default="0", allowed=CVAR_BOOL, case_sensitive=False,
    on_bad_value=_BLOCKING.on_bad_value)
_NAN_CHECK = EnvVar(
    "TORCH_NCCL_NAN_CHECK", "bool", "1 checks the input of every NCCL collective for NaNs and fails on "
    "the rank that sends one.", PG_NCCL_HPP, default="0", allowed=CVAR_BOOL, case_sensitive=False,
    debug_only=True, debug_why="It launches an extra check kernel before every collective; fine while "
                               "hunting a NaN.", on_bad_value=_BLOCKING.on_bad_value)
_PIPE_FILE = EnvVar(
    "TORCH_NCCL_DEBUG_INFO_PIPE_FILE", "str", "Path prefix of a per-rank named pipe; writing to it makes "
    "that rank dump its flight-recorder trace.", PG_NCCL_CPP, default=None)
_REG_HOOK = EnvVar(
    "TORCH_NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", "bool", "1 registers every CUDA caching-allocator "
    "segment with all NCCL communicators (user buffer registration).", PG_NCCL_HPP, allowed=CVAR_BOOL,
    case_sensitive=False, on_bad_value=_BLOCKING.on_bad_value)
_RETHROW = EnvVar(
    "TORCH_NCCL_RETHROW_CUDA_ERRORS", "bool", "1 makes the watchdog rethrow CUDA errors it sees.",
    PG_NCCL_HPP, default="1", allowed=CVAR_BOOL, case_sensitive=False, on_bad_value=_BLOCKING.on_bad_value)
_CPP_STACK_SHUTDOWN = EnvVar(
    "TORCH_NCCL_LOG_CPP_STACK_ON_UNCLEAN_SHUTDOWN", "bool", "1 logs C++ stack traces when the monitor "
    "thread kills a hung process.", PG_NCCL_HPP, default="1", allowed=CVAR_BOOL, case_sensitive=False,
    on_bad_value=_BLOCKING.on_bad_value)
_EXTRA_DUMP = EnvVar(
    "TORCH_NCCL_EXTRA_DUMP_ON_EXEC", "bool", "1 makes the flight-recorder trace include only active "
    "collectives when dumping on an exception.", PG_NCCL_HPP, default="0", allowed=CVAR_BOOL,
    case_sensitive=False, on_bad_value=_BLOCKING.on_bad_value)
_EVENT_CACHE = EnvVar(
    "TORCH_NCCL_CUDA_EVENT_CACHE", "bool", "1 reuses CUDA events for collectives instead of destroying "
    "them (destroying events under the CUDA lock has caused hangs).", PG_NCCL_HPP, default="1",
    default_note="1 in recent PyTorch; 0 in older 2.x", allowed=CVAR_BOOL, case_sensitive=False,
    on_bad_value=_BLOCKING.on_bad_value)
_EAGER_WARN = EnvVar(
    "TORCH_NCCL_SHOW_EAGER_INIT_P2P_SERIALIZATION_WARNING", "bool", "1 shows the warning that eagerly "
    "initialised P2P operations are serialised.", PG_NCCL_HPP, default="1", allowed=CVAR_BOOL,
    case_sensitive=False, on_bad_value=_BLOCKING.on_bad_value)
_RANKS_PER_ROOT = EnvVar(
    "TORCH_NCCL_RANKS_PER_ROOT", "int", "How many ranks each root covers during NCCL communicator "
    "initialisation (scalable init).", PG_NCCL_HPP, minimum=1, on_bad_value=_TRACE_BUFFER.on_bad_value)

# ---------------------------------------------------------------- PyTorch: debugging and logging
_DIST_DEBUG = EnvVar(
    "TORCH_DISTRIBUTED_DEBUG", "enum", "Extra checks and logs of torch.distributed: OFF, INFO or DETAIL.",
    TORCH_DIST_DOCS, default="OFF", allowed=("OFF", "INFO", "DETAIL"), case_sensitive=False,
    debug_only=True, debug_values=("DETAIL",),
    debug_why="DETAIL wraps every process group in a wrapper that checks each collective's shapes across "
              "ranks before running it, and turns on desync debug and flight-recorder dumps: much slower. "
              "Fine while hunting a mismatch; turn it off afterwards. With DDP on gloo, torch 2.13's "
              "DistributedDataParallel constructor crashes under DETAIL (SIGSEGV on every rank, no Python error; "
              "reproduced in the workbook): check collectives before DDP is built, or use INFO.",
    on_bad_value="PyTorch raises 'The value of TORCH_DISTRIBUTED_DEBUG must be OFF, INFO, or DETAIL.' "
                 "(torch/csrc/distributed/c10d/debug.cpp).")
_CPP_LOG = EnvVar(
    "TORCH_CPP_LOG_LEVEL", "enum", "Level of PyTorch's C++ (c10/glog) logging, which carries the c10d "
    "messages: INFO, WARNING, ERROR or FATAL (or 0-3).", TORCH_DEBUG_DOCS, default="WARNING",
    allowed=("INFO", "WARNING", "ERROR", "FATAL", "0", "1", "2", "3"), case_sensitive=False,
    on_bad_value="c10 prints 'TORCH_CPP_LOG_LEVEL environment variable cannot be parsed' and keeps WARNING.")
_SHOW_CPP = EnvVar(
    "TORCH_SHOW_CPP_STACKTRACES", "bool", "1 appends the C++ stack trace to errors raised from PyTorch's "
    "C++ code.", TORCH_DEBUG_DOCS, default="0", allowed=CHECK_ENV_BOOL,
    on_bad_value="c10::utils::check_env warns and ignores anything but 0 or 1.")

# ---------------------------------------------------------------- Gloo
_GLOO_IFNAME = EnvVar(
    "GLOO_SOCKET_IFNAME", "ifname", "Network interfaces Gloo uses, as a comma-separated list of exact "
    "names.", TORCH_DIST_DOCS, default=None,
    default_note="unset: the interface holding the address the host name resolves to")
_GLOO_TRANSPORT = EnvVar(
    "GLOO_DEVICE_TRANSPORT", "enum", "Which Gloo transport PyTorch creates: TCP (Linux default), UV "
    "(macOS/Windows default) or TCP_TLS.", GLOO_DEVICE_FACTORY, default=None,
    default_note="unset: TCP on Linux, UV on macOS and Windows",
    allowed=("TCP", "TCP_TLS", "UV", "LINUX", "APPLE", "WIN32"),
    on_bad_value="An unknown name makes process-group creation fail with 'unsupported gloo device'.",
    note="The names are registry keys and are case-sensitive; TCP_TLS and UV exist only if PyTorch was "
         "built with them.")

# ---------------------------------------------------------------- rendezvous / launcher
_MASTER_ADDR = EnvVar(
    "MASTER_ADDR", "str", "Host name or address of rank 0, where the rendezvous TCPStore listens "
    "(env:// init).", TORCH_DIST_DOCS, default=None, default_note="set by torchrun (--master-addr)")
_MASTER_PORT = EnvVar(
    "MASTER_PORT", "port", "Port of the rendezvous TCPStore on MASTER_ADDR (env:// init).", TORCH_DIST_DOCS,
    default=None, default_note="set by torchrun; its --master-port defaults to 29500", minimum=1,
    maximum=65535)
_WORLD_SIZE = EnvVar(
    "WORLD_SIZE", "int", "Total number of ranks in the job.", TORCHRUN_DOCS, default=None,
    default_note="set by torchrun", minimum=1)
_RANK = EnvVar("RANK", "int", "Global rank of this process, from 0 to WORLD_SIZE-1.", TORCHRUN_DOCS,
               default=None, default_note="set by torchrun", minimum=0)
_LOCAL_RANK = EnvVar(
    "LOCAL_RANK", "int", "Rank of this process on its node; usually also its GPU index.", TORCHRUN_DOCS,
    default=None, default_note="set by torchrun", minimum=0)
_RDZV_STORE = EnvVar(
    "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "bool", "1 stops torchrun's c10d rendezvous from handing its "
    "TCPStore to the workers, so the default process group opens its own store.", DYNAMIC_RDZV_PY,
    default="0", allowed=("0", "1"), note="Only the exact value 1 is recognised.")
_OMP = EnvVar(
    "OMP_NUM_THREADS", "int", "OpenMP threads per process for CPU ops.", TORCHRUN_PY, default=None,
    default_note="unset; torchrun sets 1 per rank (with a warning) when --nproc-per-node > 1", minimum=1)

# ---------------------------------------------------------------- CUDA
_LAUNCH_BLOCKING = EnvVar(
    "CUDA_LAUNCH_BLOCKING", "bool", "1 makes every CUDA kernel launch synchronous, so errors point at the "
    "kernel that failed.", CUDA_ENV_DOCS, default="0", allowed=("0", "1"), debug_only=True,
    debug_why="CUDA documents it as a debugging aid only: every launch waits for the GPU, which slows "
              "training a lot and changes timing (a hang can move or disappear).")
_VISIBLE = EnvVar(
    "CUDA_VISIBLE_DEVICES", "str", "Which GPUs the process sees, and in what order (indices or UUIDs, "
    "comma-separated).", CUDA_ENV_DOCS, default=None, default_note="unset: all GPUs; empty: none",
    note="An invalid entry hides itself and every GPU listed after it.")
_ALLOC = EnvVar(
    "PYTORCH_CUDA_ALLOC_CONF", "str", "Options of PyTorch's CUDA caching allocator, e.g. "
    "expandable_segments:True or max_split_size_mb:<n>.", TORCH_CUDA_ENV_DOCS, default=None,
    note="Recent PyTorch docs call it a backward-compatible alias of PYTORCH_ALLOC_CONF; both names are "
         "read by PyTorch 2.13.")
_ALLOC_NEW = EnvVar(
    "PYTORCH_ALLOC_CONF", "str", "Options of PyTorch's caching allocator (newer, device-neutral name of "
    "PYTORCH_CUDA_ALLOC_CONF).", TORCH_CUDA_ENV_DOCS, default=None)

CATALOG: dict[str, EnvVar] = _entries(
    _NCCL_DEBUG, _NCCL_DEBUG_SUBSYS, _NCCL_DEBUG_FILE,
    _NCCL_SOCKET_IFNAME, _NCCL_SOCKET_FAMILY, _NCCL_SOCKET_NTHREADS, _NCCL_NSOCKS_PERTHREAD,
    _NCCL_SOCKET_RETRY_CNT, _NCCL_SOCKET_RETRY_SLEEP_MSEC,
    _NCCL_IB_DISABLE, _NCCL_IB_HCA, _NCCL_IB_TIMEOUT, _NCCL_IB_RETRY_CNT, _NCCL_IB_GID_INDEX, _NCCL_IB_TC,
    _NCCL_IB_SL,
    _NCCL_NET, _NCCL_NET_GDR_LEVEL, _NCCL_CROSS_NIC, _NCCL_TOPO_FILE,
    _NCCL_P2P_DISABLE, _NCCL_P2P_LEVEL, _NCCL_SHM_DISABLE, _NCCL_BUFFSIZE, _NCCL_ALGO, _NCCL_PROTO,
    _NCCL_MIN_CTAS, _NCCL_MAX_CTAS, _NCCL_MIN_NCHANNELS, _NCCL_MAX_NCHANNELS,
    _alias("NCCL_MIN_NRINGS", _NCCL_MIN_NCHANNELS, NCCL_ENV,
           "NCCL_MIN_NCHANNELS wins: the old name is ignored when it is set."),
    _alias("NCCL_MAX_NRINGS", _NCCL_MAX_NCHANNELS, NCCL_ENV,
           "NCCL_MAX_NCHANNELS wins: the old name is ignored when it is set."),
    _NCCL_CUMEM_ENABLE, _NCCL_NVLS_ENABLE, _NCCL_LAUNCH_MODE,
    _ASYNC, _torch_alias("NCCL_ASYNC_ERROR_HANDLING", _ASYNC),
    _BLOCKING, _torch_alias("NCCL_BLOCKING_WAIT", _BLOCKING),
    _DESYNC, _torch_alias("NCCL_DESYNC_DEBUG", _DESYNC),
    _TIMING, _torch_alias("NCCL_ENABLE_TIMING", _TIMING),
    _REG_HOOK, _torch_alias("NCCL_USE_TENSOR_REGISTER_ALLOCATOR_HOOK", _REG_HOOK),
    _TRACE_BUFFER, _FR_BUFFER, _DUMP, _HEARTBEAT, _MONITORING, _WAIT_DUMP, _COORD, _AVOID_RECORD,
    _NONBLOCKING, _FR_DUMP_FILE,
    _alias("TORCH_NCCL_DEBUG_INFO_TEMP_FILE", _FR_DUMP_FILE, FLIGHT_RECORDER_CPP,
           _TORCH_WINS.format(new=_FR_DUMP_FILE.name, old="TORCH_NCCL_DEBUG_INFO_TEMP_FILE"),
           note="PyTorch 2.13 still reads it (with a deprecation warning); releases before the Flight "
                "Recorder rename read only this name, so set both if you run several versions."),
    _FR_CPP_STACK, _torch_alias("TORCH_NCCL_TRACE_CPP_STACK", _FR_CPP_STACK, FLIGHT_RECORDER_HPP),
    _NAN_CHECK, _PIPE_FILE, _RETHROW, _CPP_STACK_SHUTDOWN, _EXTRA_DUMP, _EVENT_CACHE, _EAGER_WARN,
    _RANKS_PER_ROOT,
    _DIST_DEBUG, _CPP_LOG, _SHOW_CPP,
    _GLOO_IFNAME, _GLOO_TRANSPORT,
    _MASTER_ADDR, _MASTER_PORT, _WORLD_SIZE, _RANK, _LOCAL_RANK, _RDZV_STORE, _OMP,
    _LAUNCH_BLOCKING, _VISIBLE, _ALLOC, _ALLOC_NEW,
)

# Real variables with a checked prefix that the catalog does not describe in detail: the linter must
# not call them unknown.  Name -> where it is documented or read.
OTHER_KNOWN: dict[str, str] = {
    **{f"NCCL_{n}": NCCL_ENV for n in (
        "SOCKET_MAGIC", "SOCKET_POLL_TIMEOUT_MSEC", "IB_ADDR_FAMILY", "IB_ADDR_RANGE", "IB_ROCE_VERSION_NUM",
        "IB_FIFO_TC", "IB_RETURN_ASYNC_EVENTS", "OOB_NET_ENABLE", "OOB_NET_IFNAME", "UID_STAGGER_THRESHOLD",
        "UID_STAGGER_RATE", "NET_PLUGIN", "TUNER_PLUGIN", "PROFILER_PLUGIN", "ENV_PLUGIN",
        "IGNORE_CPU_AFFINITY", "CONF_FILE", "DEBUG_TIMESTAMP_FORMAT", "DEBUG_TIMESTAMP_LEVELS",
        "COLLNET_ENABLE", "COLLNET_NODE_THRESHOLD", "CTA_POLICY", "NETDEVS_POLICY", "MULTI_RANK_GPU_ENABLE",
        "TOPO_DUMP_FILE", "SET_THREAD_NAME", "P2P_DIRECT_DISABLE", "NTHREADS", "CHECKS_DISABLE",
        "CHECK_POINTERS", "CHECK_MODE", "IB_AR_THRESHOLD", "IB_OOO_RQ", "IB_QPS_PER_CONNECTION",
        "IB_SPLIT_DATA_ON_QPS", "IB_PCI_RELAXED_ORDERING", "IB_ADAPTIVE_ROUTING", "IB_ECE_ENABLE",
        "MEM_SYNC_DOMAIN", "CUMEM_HOST_ENABLE", "NET_GDR_C2C", "NET_GDR_READ", "GDRCOPY_ENABLE",
        "GDRCOPY_FIFO_ENABLE", "GDRCOPY_SYNC_ENABLE", "GDRCOPY_FLUSH_ENABLE", "NET_SHARED_BUFFERS",
        "NET_SHARED_COMMS", "IGNORE_NET_MISMATCH", "IGNORE_COLLNET_MISMATCH", "NVB_DISABLE", "PXN_DISABLE",
        "P2P_PXN_LEVEL", "PXN_C2C", "RUNTIME_CONNECT", "GRAPH_REGISTER", "LOCAL_REGISTER",
        "LEGACY_CUDA_REGISTER", "WIN_ENABLE", "SET_STACK_SIZE", "GRAPH_MIXING_SUPPORT",
        "GRAPH_STREAM_ORDERING", "DMABUF_ENABLE", "P2P_NET_CHUNKSIZE", "P2P_LL_THRESHOLD",
        "ALLOC_P2P_NET_LL_BUFFERS", "COMM_BLOCKING", "CGA_CLUSTER_SIZE", "IB_MERGE_NICS", "NET_MERGE_LEVEL",
        "NET_MERGE_POLICY", "MNNVL_ENABLE", "MNNVL_UUID", "MNNVL_CLIQUE_ID", "RAS_ENABLE", "RAS_ADDR",
        "RAS_TIMEOUT_FACTOR", "LAUNCH_ORDER_IMPLICIT", "LAUNCH_RACE_FATAL", "IPC_USE_ABSTRACT_SOCKET",
        "SYM_GIN_KERNELS_ENABLE", "COMM_ID")},
    "NCCL_SOCKET_RCVBUF": NCCL_SOCKET_CC, "NCCL_SOCKET_SNDBUF": NCCL_SOCKET_CC,
    "NCCL_WARN_ENABLE_DEBUG_INFO": NCCL_DEBUG_CC,
    **{f"TORCH_NCCL_{n}": PG_NCCL_HPP for n in (
        "BCAST_UNIQUEID", "HIGH_PRIORITY", "PROPAGATE_ERROR")},
    "TORCH_DISTRIBUTED_USE_TORCHCOMMS": DIST_CONFIG_PY, "TORCH_DISTRIBUTED_COMPILE_ON_ONE_RANK": DIST_CONFIG_PY,
    **{f"GLOO_DEVICE_TRANSPORT_TCP_TLS_{n}": GLOO_DEVICE_FACTORY for n in ("PKEY", "CERT", "CA_FILE", "CA_PATH")},
    **{f"GLOO_{n}": GLOO_REPO for n in (
        "DISABLE_CONNECTION_RETRIES", "ENABLE_RANK_AS_SEQUENCE_NUMBER", "ENABLE_STORE_V2_API", "LOG_LEVEL")},
}

_TIMEOUT_FIX = ("Set the collective timeout in code: init_process_group(..., timeout=timedelta(minutes=N)); "
                "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC bounds a stuck watchdog, and NCCL_SOCKET_RETRY_CNT / "
                "NCCL_SOCKET_RETRY_SLEEP_MSEC (NCCL >= 2.24) control socket connection retries.")

KNOWN_WRONG: dict[str, WrongName] = {w.name: w for w in (
    WrongName("NCCL_TIMEOUT", "No such variable in NCCL or PyTorch: nothing reads it, so it changes no "
              "timeout.", "Set the collective timeout with init_process_group(..., "
              "timeout=timedelta(minutes=N)); the watchdog heartbeat is TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC. "
              "(NCCL_IB_TIMEOUT is an unrelated InfiniBand verbs setting.)", NCCL_ENV),
    WrongName("NCCL_SOCKET_TIMEOUT", "Not an NCCL variable: the NCCL env docs and src/misc/socket.cc define "
              "no socket timeout, so it is ignored.", _TIMEOUT_FIX, NCCL_ENV),
    WrongName("NCCL_CONNECT_TIMEOUT", "Not an NCCL variable: the NCCL env docs and src/misc/socket.cc define "
              "no connect timeout, so it is ignored.", _TIMEOUT_FIX, NCCL_ENV),
    WrongName("NCCL_HEARTBEAT_TIMEOUT_SEC", "Not read by PyTorch or NCCL: PyTorch 2.13 reads only the "
              "TORCH_NCCL_ name (no old-name fallback for this one).",
              "Rename it to TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC.", PG_NCCL_HPP),
    WrongName("ACCELERATE_USE_GLOO", "Hugging Face Accelerate does not read it: Accelerate picks the "
              "backend itself (nccl for multi-GPU; gloo, ccl or mpi for multi-CPU).",
              "To force gloo, pass Accelerator(kwargs_handlers=[InitProcessGroupKwargs(backend='gloo')]) "
              "(recent Accelerate), or call torch.distributed.init_process_group('gloo') before creating "
              "the Accelerator (it then reuses that group).", ACCELERATE_STATE_PY),
)}

RETIRED: dict[str, WrongName] = {w.name: w for w in (
    WrongName("NCCL_IB_GDR_LEVEL", "Renamed to NCCL_NET_GDR_LEVEL in NCCL 2.4.0.",
              "Rename it to NCCL_NET_GDR_LEVEL (a Debugging setting: prefer leaving it unset).", NCCL_ENV,
              retired=True),
    WrongName("NCCL_IB_CUDA_SUPPORT", "Removed in NCCL 2.4.0.", "Use NCCL_NET_GDR_LEVEL (or leave it unset).",
              NCCL_ENV, retired=True),
    WrongName("NCCL_SINGLE_RING_THRESHOLD", "Removed in NCCL 2.3.", "Remove it.", NCCL_ENV, retired=True),
    WrongName("NCCL_LL_THRESHOLD", "Removed in NCCL 2.5.", "Remove it (NCCL_PROTO selects protocols, for "
              "debugging only).", NCCL_ENV, retired=True),
    WrongName("NCCL_TREE_THRESHOLD", "Removed in NCCL 2.5.", "Remove it (NCCL_ALGO selects algorithms, for "
              "debugging only).", NCCL_ENV, retired=True),
)}


def lookup(name: str) -> EnvVar | None:
    """The catalog entry for ``name`` (exact, case-sensitive like the environment), or None."""
    return CATALOG.get(name)


def wrong_name(name: str) -> WrongName | None:
    """The known-wrong or retired entry for ``name``, or None."""
    return KNOWN_WRONG.get(name) or RETIRED.get(name)


def is_known(name: str) -> bool:
    """True for names the catalog describes or knows to be real."""
    return name in CATALOG or name in OTHER_KNOWN
