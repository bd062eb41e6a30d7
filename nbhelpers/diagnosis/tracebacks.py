"""Where a rank was, from any script: its Python traceback or its py-spy stack, read as text.

A user's training script emits no events.  What every rank leaves anyway is a traceback in its log
when it raised, and a py-spy dump when the workbook stopped it.  From either this module takes:
the exception (type and message), the innermost frame of the user's own code (file:line, function,
the source line when the traceback shows it), and the collective the rank was in, named from
torch's frames (``all_reduce``, ``broadcast``, ``barrier``, DDP's gradient all_reduce in backward,
a store wait in ``init_process_group``).  Pure text in, dataclasses out.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field

__all__ = ["Frame", "Where", "last_traceback", "exceptions", "stack_frames", "spy_threads", "faulthandler_as_spy",
           "main_thread_active", "user_frame", "collective_of", "where_from"]

RANK_PREFIX = re.compile(r"^(?:\[(?:rank|default)?\d+\]:\s?)+")     # torchrun --tee / [rank1]: prefixes
RANK_NUMBER = re.compile(r"^\[(?:rank|default)?(\d+)\]:")
TB_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
SPY_FRAME = re.compile(r"^\s{4}(\S.*?) \((.+?):(\d+)\)\s*$")
SPY_THREAD = re.compile(r'^Thread (?:0x)?[0-9A-Fa-f]+ \(([\w+ ]+)\): "([^"]+)"')  # (idle), (active), (active+gil)
# the exception line closing a traceback: "ValueError: ...", "torch.distributed.DistBackendError: ...", and the C
# extension modules' lower-case ones ("zlib.error: ...", "struct.error", "socket.timeout", "lzma.LZMAError")
EXC_LINE = re.compile(r"^((?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Timeout)|Stop(?:Async)?Iteration|"
                      r"(?:[A-Za-z_]\w*\.)+(?:error|timeout|herror|gaierror))(?::\s?(.*))?$")
# any other exception class closing a traceback, once its frames are read: a line at the margin that is a dotted
# CamelCase name, with or without a message ("torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
# Could not guard ...", "torch._dynamo.exc.Unsupported: ...")
ANY_EXC_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z][A-Za-z0-9_]*)(?::\s?(.*))?$")
LIBRARY = re.compile(r"(site-packages|dist-packages)/|/lib/python3\.\d+/|^<frozen |^<string>|/nbhelpers/runtime/")
THIRD_PARTY = {"torch", "numpy", "transformers", "accelerate", "lightning", "pytorch_lightning", "deepspeed", "tqdm",
               "torchvision", "torchaudio", "datasets", "triton", "apex", "megatron", "fairscale", "timm", "hydra"}
# torch.distributed's collectives and waits, by the name of their Python function
COLLECTIVES = {"all_reduce", "broadcast", "barrier", "all_gather", "all_gather_into_tensor", "all_gather_object",
               "reduce_scatter", "reduce_scatter_tensor", "all_to_all", "all_to_all_single", "gather", "scatter",
               "reduce", "send", "recv", "isend", "irecv", "monitored_barrier", "broadcast_object_list",
               "gather_object", "scatter_object_list", "batch_isend_irecv", "init_process_group", "new_group",
               "_store_based_barrier", "destroy_process_group", "wait"}


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    func: str
    code: str = ""

    @property
    def library(self) -> bool:
        """Code the user did not write: torch, the standard library, installed packages, the workbook's shim."""
        if LIBRARY.search(self.file):
            return True
        if self.file.startswith("/"):
            return False
        top = self.file.split("/", 1)[0].removesuffix(".py")
        return "/" in self.file and (top in THIRD_PARTY or top in sys.stdlib_module_names) or \
            "/" not in self.file and top in sys.stdlib_module_names

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where} in {self.func}" + (f": {self.code}" if self.code else "")


@dataclass
class Where:
    """One rank's position: from its traceback (``source="traceback"``) or a stack dump (``"stack"``)."""
    source: str
    frames: list[Frame] = field(default_factory=list)   # outermost first
    exc_type: str | None = None
    message: str = ""

    @property
    def user(self) -> Frame | None:
        return user_frame(self.frames)

    @property
    def collective(self) -> str | None:
        return collective_of(self.frames)

    @property
    def exception(self) -> str:
        return (f"{self.exc_type}: {self.message}".strip() if self.message else self.exc_type) if self.exc_type else ""

    def describe(self) -> str:
        """``all_reduce at train.py:45 in train`` / ``at loader.py:12 in read``: short (the file's name, not its
        folder), for reasons; :attr:`user` has the full path."""
        u = self.user
        at = f"{u.file.rsplit('/', 1)[-1]}:{u.line} in {u.func}" if u else "(no frame of your code)"
        return f"{self.collective} at {at}" if self.collective else f"at {at}"


ORIGINAL = "Original Traceback (most recent call last):"  # a DataLoader worker's (or replica's) own traceback,
# re-raised in the main process: "X: Caught X in DataLoader worker process 1." then the worker's frames and exception


def _reraised(lines: list[str], i: int) -> bool:
    """The exception on line ``i`` is a worker's, re-raised: its "Original Traceback" follows (prefixes allowed)."""
    return i + 1 < len(lines) and RANK_PREFIX.sub("", lines[i + 1]).startswith(ORIGINAL)


def _exception_line(line: str, frames: list[Frame]) -> re.Match | None:
    """The exception line closing a traceback whose ``frames`` were read (prefixes stripped), at the margin: a known
    exception wording, else a module-qualified class (``torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode:
    ...``) or a bare ``Exception: message``; a bare word ("Loss: 0.41", another process's line) is not one, nor is
    mp.spawn's bare ``Exception:`` wrapper (the rank's own traceback follows it)."""
    if not frames or line.startswith((" ", "\t")):
        return None
    known = EXC_LINE.match(line.strip())
    if known:
        return known
    other = ANY_EXC_LINE.match(line.strip())
    if other and ("." in other.group(1) or other.group(1) == "Exception" and (other.group(2) or "").strip()):
        return other
    return None


def _lines(text: str) -> list[str]:
    return [RANK_PREFIX.sub("", ln.rstrip("\r")) for ln in text.splitlines()]


def last_traceback(log: str) -> Where | None:
    """The last Python traceback in a rank's log (prefixes such as ``[rank1]:`` stripped), or None."""
    lines = _lines(log)
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last):")]
    if not starts:
        return None
    frames: list[Frame] = []
    exc_type, message = None, ""
    i = starts[-1] + 1
    while i < len(lines):
        m = TB_FRAME.match(lines[i])
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not TB_FRAME.match(lines[i + 1]) else ""
            code = "" if set(code) <= set("^~ ") else code
            frames.append(Frame(m.group(1), int(m.group(2)), m.group(3), code))
            i += 1
            continue
        e = _exception_line(lines[i], frames)
        if e:
            exc_type, message = e.group(1), (e.group(2) or "").strip()
            if _reraised(lines, i):  # the worker's frames and error follow
                i += 2
                continue
            break
        i += 1
    return Where("traceback", frames, exc_type, message) if frames else None


def exceptions(log: str) -> list[tuple[int | None, int, Where]]:
    """Every Python traceback in ``log`` that ends in an exception, as (rank, 0-based line of the exception line,
    Where); the rank is read from a ``[rankN]:`` prefix, None without one.  Ranks' interleaved lines are kept
    apart by their prefixes."""
    out, open_ = [], {}   # rank -> frames of the traceback being read
    raws = log.splitlines()
    for i, raw in enumerate(raws):
        m = RANK_NUMBER.match(raw)
        rank = int(m.group(1)) if m else None
        ln = RANK_PREFIX.sub("", raw.rstrip("\r"))
        if ln.startswith("Traceback (most recent call last):"):
            open_[rank] = []
            continue
        frames = open_.get(rank)
        if frames is None:
            continue
        f = TB_FRAME.match(ln)
        if f:
            frames.append(Frame(f.group(1), int(f.group(2)), f.group(3)))
            continue
        e = _exception_line(ln, frames)
        if e:
            if _reraised(raws, i):
                continue  # re-raised from a DataLoader worker: its own frames and exception come next
            out.append((rank, i, Where("traceback", frames, e.group(1), (e.group(2) or "").strip())))
            del open_[rank]
    return out


def stack_frames(dump: str) -> Where | None:
    """The main thread of a ``py-spy dump`` (innermost first there; outermost first here), or None when the
    dump holds no stack (py-spy missing, or the process already gone)."""
    frames: list[Frame] = []
    in_main = False
    for ln in dump.splitlines():
        t = SPY_THREAD.match(ln)
        if t:
            if frames:
                break
            in_main = t.group(2) == "MainThread"
            continue
        m = SPY_FRAME.match(ln)
        if m and in_main:
            frames.append(Frame(m.group(2), int(m.group(3)), m.group(1).rsplit(".", 1)[-1]))
    return Where("stack", frames[::-1]) if frames else None


def spy_threads(dump: str) -> list[tuple[str, list[Frame]]]:
    """Every thread of a ``py-spy dump``: (its name, its frames outermost first); threads without a Python frame
    (a C++ worker) are left out."""
    found: list[tuple[str, list[Frame]]] = []
    for ln in dump.splitlines():
        t = SPY_THREAD.match(ln)
        if t:
            found.append((t.group(2), []))
        elif found and (m := SPY_FRAME.match(ln)):
            found[-1][1].insert(0, Frame(m.group(2), int(m.group(3)), m.group(1).rsplit(".", 1)[-1]))
    return [(name, frames) for name, frames in found if frames]


FH_THREAD = re.compile(r"^(?:Current thread|Thread) (0x[0-9a-fA-F]+) \(most recent call first\):")
FH_FRAME = re.compile(r'^\s+File "(.+)", line (\d+) in (.+?)\s*$')


def faulthandler_threads(text: str) -> list[tuple[str, bool, list[tuple[str, str, str]]]]:
    """Python's faulthandler dump at the start of ``text`` as its threads, in the order it lists them: (thread id,
    whether it is the thread that died -- "Current thread" --, its frames as (file, line, function), innermost
    first).  Reading stops at the first line past the dump ("Extension modules: ...", the rest of a log)."""
    threads: list[tuple[str, bool, list[tuple[str, str, str]]]] = []
    for ln in text.splitlines():
        if t := FH_THREAD.match(ln):
            threads.append((t.group(1), ln.startswith("Current thread "), []))
        elif (f := FH_FRAME.match(ln)) and threads:
            threads[-1][2].append(f.groups())
        elif threads and ln.strip() and ln.strip() != "<no Python frame>":
            break
    return threads


def faulthandler_as_spy(text: str) -> str:
    """Python's faulthandler dump (every thread, innermost frame first) written as ``py-spy dump`` writes one, so
    one reader serves both.  faulthandler names no thread and gives no state: the main thread is the one whose
    outermost frame is a module's top level (``<module>``), the state is ``unknown``."""
    threads = [(tid, frames) for tid, _, frames in faulthandler_threads(text)]
    out = []
    for i, (tid, frames) in enumerate(threads):
        name = "MainThread" if frames and frames[-1][2] == "<module>" else f"Thread-{i}"
        out.append(f'Thread {tid} (unknown): "{name}"')
        out.extend(f"    {func} ({file}:{line})" for file, line, func in frames)
    return "\n".join(out) + ("\n" if out else "")


def main_thread_active(dump: str) -> bool | None:
    """Whether a ``py-spy dump`` shows the main thread running (``active``: on a CPU or waiting for one) rather
    than asleep in the kernel (``idle``: a gloo wait, a lock, a queue, ``time.sleep``); None when it does not say."""
    for ln in dump.splitlines():
        t = SPY_THREAD.match(ln)
        if t and t.group(2) == "MainThread":
            return t.group(1).startswith("active")
    return None


def user_frame(frames: list[Frame]) -> Frame | None:
    """The innermost frame of the user's own code."""
    return next((f for f in reversed(frames) if not f.library), None)


def collective_of(frames: list[Frame]) -> str | None:
    """The torch.distributed call a rank was in, named from its frames (innermost that tells)."""
    for f in reversed(frames):
        path = f.file.replace("\\", "/")
        if "torch/distributed/" in path and f.func in COLLECTIVES and f.func != "wait":
            return f.func.lstrip("_")
        if "torch/nn/parallel/distributed" in path and f.func == "__init__":
            return "DDP constructor (parameter broadcast)"
        if "torch/nn/parallel/distributed" in path and f.func in ("forward", "_pre_forward"):
            return "DDP forward (buffer broadcast)"
        if "torch/autograd/" in path and f.func in ("backward", "_engine_run_backward"):
            return "backward (DDP's gradient all_reduce)"
        if "torch/distributed/" in path and f.func == "wait":
            return "wait (an async collective)"
    return None


def where_from(log: str, stack: str = "") -> Where | None:
    """Where a rank was when it ended: its stack dump when it was stopped (it shows where it waited), else the
    traceback it raised; also when the dump holds none of the user's frames (the program had raised and ended, and
    the stop found the process in the rank shim's last steps)."""
    spy = stack_frames(stack) if stack else None
    if spy is None or not spy.frames:
        return last_traceback(log)
    return spy if user_frame(spy.frames) else last_traceback(log) or spy
