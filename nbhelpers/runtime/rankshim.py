"""Per-rank supervision that runs *inside* the rank: torchrun starts it in place of the rank's program.

    python nbhelpers/runtime/rankshim.py --log-dir DIR -- train.py [args]
    python nbhelpers/runtime/rankshim.py --log-dir DIR -- -m nbhelpers.workers.probe [args]
    python nbhelpers/runtime/rankshim.py --log-dir DIR -- -c CODE [args]
    python nbhelpers/runtime/rankshim.py --log-dir DIR --no-record -- train.py   # without the collective record

It sets up what the workbook reads, then runs the program in this same process, as ``python train.py`` would
(a ``__main__`` of its own that lives as long as the process, ``sys.argv``, ``sys.path[0]``).  So a supervised rank is the process torchrun
started: the same pid, parent (``os.getppid()`` is torchrun's agent, as under plain torchrun), session,
environment, signal dispositions and stdin.  What it adds:

- stdout and stderr merged into ``DIR/rank<R>.log`` (torchrun's ``--redirects 3`` does the same, per stream);
- an exit record ``DIR/rank<R>.json``: pid and start at once; when the program is done, the exit Python is
  about to make (``python_exit``: 0, an uncaught exception's 1, ``sys.exit(n)``) and when (``python_end``).  That is not
  yet the rank's return code: the process can still abort in its C++ destructors (a process group never
  destroyed), and a rank killed by a signal writes nothing.  The launcher completes the record (``end``,
  ``returncode``, ``signal``) from the kernel, torchrun's failure report, and this;
- Python's faulthandler on: a fatal signal (SIGSEGV, SIGABRT, ...) prints every thread's stack to the log; a
  SIGTERM (torchrun or the launcher stopping the world) first writes every thread's stack to
  ``DIR/rank<R>.term.txt``, then takes its course (the default ends the rank; a handler the program sets
  itself replaces this one);
- PR_SET_PDEATHSIG: the rank gets SIGTERM if torchrun's agent dies, so no rank outlives its launcher;
- the rank's collective record, ``DIR/fr/rank<R>.pkl``: torch's Flight Recorder keeps, in every process that
  uses torch.distributed, the last 2000 collectives it issued (sequence id, op, sizes, dtypes, group; on by
  default, ``TORCH_FR_BUFFER_SIZE``), but gloo never writes it anywhere.  The shim writes it (without the
  entries' stack frames: symbolising them costs seconds of CPU the first time) when the program is done, and
  whenever ``DIR/fr/request`` changes: a thread of the shim's own looks five times a second, so it answers
  while the program waits inside a collective.  A rank whose program fails writes the request itself and waits
  up to a second for its local peers' records, before torchrun stops them.  A rank that aborts while the program
  runs (gloo's size check) writes it too, from a SIGABRT handler faulthandler chains to (:class:`_AbortHook`).

Nothing is set in the environment, no process is started; the only signal handlers are faulthandler's and, behind
it until the program is done, the abort hook's: the program's own outcome and exit are those of plain torchrun.

Only the standard library is imported here, and the program's tracebacks are printed without this file's
frames: the log reads as plain torchrun's would.
"""
import sys

del sys.path[0]  # this file's folder (python put it first): it must not shadow a module of the program's

import builtins  # noqa: E402
import ctypes  # noqa: E402
import faulthandler  # noqa: E402
import importlib.machinery  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import runpy  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

PR_SET_PDEATHSIG = 1
FR_LOOK_S = 0.2       # how often the record thread looks at the request file
FR_PEERS_WAIT_S = 1.0  # how long a failing rank waits for its local peers' records
FR_ABORT_WAIT_S = 2.0  # how long an aborting rank waits for its own record before it dies


def _save(path, record):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f)
    os.replace(tmp, path)


def _parent_death_signal(sig):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def _exit_code(code):
    """What ``sys.exit(code)`` makes the process return (None: 0; a number: itself; anything else: 1)."""
    if code is None:
        return 0
    return code & 0xFF if isinstance(code, int) else 1


def _fr_write(path):
    """Write this process's Flight Recorder record to ``path`` (whole or not at all); False when the program never
    used torch.distributed or recorded no collective."""
    c10d = sys.modules.get("torch._C._distributed_c10d")
    dump = getattr(c10d, "_dump_fr_trace", None)
    if dump is None:
        return False
    try:
        data = dump(True, False)  # collectives, no stack frames
    except Exception:  # noqa: BLE001 - a record is a bonus; the program's own outcome must not change for it
        return False
    if b"collective_seq_id" not in data:  # no entry
        return False
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


class _Recorder(threading.Thread):
    """Writes the record each time the request file's mtime changes, until stopped; and once more, at once, when
    the process aborts (:class:`_AbortHook`)."""

    def __init__(self, request, path):
        super().__init__(name="nbhelpers-collective-record", daemon=True)
        self.request, self.path = request, path
        self.wake, self.written = threading.Event(), threading.Event()
        self.halted = self.aborting = False
        self.seen = self._mtime()

    def _mtime(self):
        try:
            return os.stat(self.request).st_mtime_ns
        except OSError:
            return None

    def run(self):
        while not self.wake.wait(FR_LOOK_S):
            m = self._mtime()
            if m is not None and m != self.seen:
                self.seen = m
                _fr_write(self.path)
        if self.aborting:
            _fr_write(self.path)
            self.written.set()

    def stop(self):
        self.halted = True
        self.wake.set()
        if self.is_alive():
            self.join(FR_LOOK_S * 5)

    def aborted(self):
        """The process is aborting: write the record now, waiting at most FR_ABORT_WAIT_S for it."""
        if self.is_alive() and not self.halted:
            self.aborting = True
            self.wake.set()
            self.written.wait(FR_ABORT_WAIT_S)


_SIGNAL_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int)


class _AbortHook:
    """While the program runs, a SIGABRT (gloo's C++ check failing in one of its threads: "op.preamble.length <=
    op.nbytes", a dtype or size that differs between ranks) still leaves the rank's collective record, which a
    rank that aborted never wrote, so the comparison lacked exactly the rank that saw the difference.

    Installed before faulthandler, which keeps it as the handler it chains to: on SIGABRT faulthandler prints every
    Python thread's stack to the log as before (gloo's own thread, which aborted, has none and is not listed), then
    re-raises the signal into this handler, which has the record thread write the record (waiting at most FR_ABORT_WAIT_S) and
    returns; ``abort()`` then ends the process by the same SIGABRT as without the workbook.  Removed before the
    program's shutdown, faulthandler then chaining to what it chained to before (an abort in the destructors at
    exit is left as it is), and it does nothing in a forked child (a DataLoader worker)."""

    def __init__(self, recorder):
        self.recorder, self.pid = recorder, os.getpid()
        self.libc = ctypes.CDLL(None)
        self.libc.signal.restype = ctypes.c_void_p
        self.libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        self.handler = _SIGNAL_HANDLER(self._abort)  # referenced here for as long as it can be called
        self.mine = ctypes.cast(self.handler, ctypes.c_void_p).value
        faulthandler.disable()  # on already where PYTHONFAULTHANDLER is set: it must chain to this one, not under it
        self.before = self.libc.signal(signal.SIGABRT, self.mine)

    def _abort(self, signum):
        if os.getpid() == self.pid:
            self.recorder.aborted()

    def remove(self):
        """faulthandler chained to this handler: take it out of the chain (faulthandler off, the handler from
        before back, faulthandler on again if it was)."""
        enabled = faulthandler.is_enabled()
        faulthandler.disable()
        current = self.libc.signal(signal.SIGABRT, self.before)
        if current != self.mine:  # the program's own handler, set since: it stays
            self.libc.signal(signal.SIGABRT, current)
        if enabled:
            faulthandler.enable(file=sys.stderr, all_threads=True)


def _ask_peers(fr_dir, log_dir, rank):
    """Ask the peers on this node for their records (touch the request) and wait, up to FR_PEERS_WAIT_S, until each
    has written one since, or its program is done (it wrote its own then)."""
    request = os.path.join(fr_dir, "request")
    with open(request, "a"):
        os.utime(request)
    asked = os.stat(request).st_mtime_ns
    peers = {int(n[4:-5]) for n in os.listdir(log_dir)
             if n.startswith("rank") and n.endswith(".json") and n[4:-5].isdigit()} - {int(rank)}
    deadline = time.monotonic() + FR_PEERS_WAIT_S
    while peers and time.monotonic() < deadline:
        time.sleep(0.05)
        peers = {r for r in peers if not _answered(fr_dir, log_dir, r, asked)}


def _answered(fr_dir, log_dir, rank, asked):
    """Whether the peer wrote its record since ``asked``, or cannot any more: its program is done (it wrote its own
    then), or its process is gone (an abort wrote it as the rank died)."""
    try:
        if os.stat(os.path.join(fr_dir, f"rank{rank}.pkl")).st_mtime_ns >= asked:
            return True
    except OSError:
        pass
    try:
        with open(os.path.join(log_dir, f"rank{rank}.json")) as f:
            rec = json.load(f)
    except (OSError, ValueError):
        return False
    if "python_end" in rec:
        return True
    try:
        os.kill(rec["pid"], 0)
    except ProcessLookupError:
        return True
    except (OSError, KeyError, TypeError):
        pass
    return False


def _user_traceback(tb):
    """The traceback from the program's first frame on: this file's and runpy's frames dropped."""
    here = os.path.abspath(__file__)
    while tb is not None and (os.path.abspath(tb.tb_frame.f_code.co_filename) == here or
                              tb.tb_frame.f_globals.get("__name__") == "runpy"):
        tb = tb.tb_next
    return tb


def _new_main(**names):
    """A fresh ``__main__`` module, in ``sys.modules`` for the rest of the process's life, as Python's own is: the
    program's globals then live until the interpreter shuts down, and die in the order they die under plain
    ``python`` (a process group still referenced there is torn down at exit, abort included)."""
    main = type(sys)("__main__")
    main.__dict__.update(__builtins__=builtins, __annotations__={}, __spec__=None, __package__=None, **names)
    sys.modules["__main__"] = main
    return main


def _run(target):
    """Run ``target`` (``script.py args``, ``-m module args`` or ``-c code args``) as ``python`` would."""
    if target[0] == "-m":
        sys.argv = [target[1], *target[2:]]  # runpy puts the module's file in argv[0], as python -m does
        sys.path.insert(0, os.getcwd())
        _new_main()
        runpy._run_module_as_main(target[1], alter_argv=True)   # what python -m itself calls
    elif target[0] == "-c":
        sys.argv = ["-c", *target[2:]]
        sys.path.insert(0, "")
        main = _new_main(__loader__=importlib.machinery.BuiltinImporter)
        exec(compile(target[1], "<string>", "exec", dont_inherit=True), main.__dict__)
    elif os.path.isfile(target[0]):
        sys.argv = list(target)
        sys.path.insert(0, os.path.dirname(os.path.realpath(target[0])))
        path = os.path.abspath(target[0])
        main = _new_main(__file__=path, __cached__=None,
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path))
        with open(target[0], "rb") as f:
            code = compile(f.read(), target[0], "exec", dont_inherit=True)
        exec(code, main.__dict__)
    else:  # a folder or a zip with __main__.py
        sys.argv = list(target)
        sys.path.insert(0, target[0])
        _new_main()
        runpy._run_module_as_main("__main__", alter_argv=False)


def parse(argv: list[str]) -> tuple[str, list[str], bool] | None:
    """``--log-dir DIR [--no-record] -- PROGRAM...`` -> (DIR, PROGRAM, keep the record); None if malformed.  The
    DeepSpeed launcher puts ``--local_rank=N`` right after the script it starts (here, the shim): it goes back where
    DeepSpeed would have put it for the program itself, right after its script or module name."""
    local = argv[0] if argv and argv[0].startswith("--local_rank=") else None
    argv = argv[1:] if local else argv
    if len(argv) < 3 or argv[0] != "--log-dir" or "--" not in argv:
        return None
    target = argv[argv.index("--") + 1:]
    if local is not None and target:
        at = 2 if target[0] in ("-m", "-c") else 1
        target = [*target[:at], local, *target[at:]]
    return argv[1], target, "--no-record" not in argv[2:argv.index("--")]  # (bench/bench_record.py: its cost)


def main(argv):
    parsed = parse(argv)
    if parsed is None:
        sys.exit(__doc__)
    log_dir, target, keep_record = parsed
    rank = os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0"))
    os.makedirs(log_dir, exist_ok=True)
    base = os.path.join(log_dir, f"rank{rank}")
    pid = os.getpid()
    _parent_death_signal(signal.SIGTERM)  # before the record says the rank started
    record = {"rank": int(rank), "pid": pid, "argv": target, "host": os.uname().nodename,
              "local_rank": int(os.environ.get("LOCAL_RANK", "0")), "start": time.time()}
    _save(base + ".json", record)

    log = os.open(base + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    fr_dir = os.path.join(log_dir, "fr")
    os.makedirs(fr_dir, exist_ok=True)
    recorder = _Recorder(os.path.join(fr_dir, "request"), os.path.join(fr_dir, f"rank{rank}.pkl"))
    hook = None
    if keep_record:
        recorder.start()
        hook = _AbortHook(recorder)  # before faulthandler, which chains to it
    faulthandler.enable(file=sys.stderr, all_threads=True)
    term = open(base + ".term.txt", "w")  # kept open: faulthandler writes to its descriptor from the handler
    faulthandler.register(signal.SIGTERM, file=term, all_threads=True, chain=True)

    def finished(code):
        """The program is done: write its collective record and the exit Python is about to make, before its
        shutdown runs (the program's atexit handlers, its threads joined).  Not in an atexit handler of ours:
        writing a file there lets other threads take the GIL at a moment plain Python would not (a gloo thread
        that would abort the process at exit finishes cleanly instead)."""
        if hook is not None:
            hook.remove()
        recorder.stop()
        wrote = keep_record and _fr_write(recorder.path)
        _save(base + ".json", {**record, "python_end": time.time(), "python_exit": code})  # before a stop can come
        if wrote and code != 0:
            _ask_peers(fr_dir, log_dir, rank)

    try:
        _run(target)
    except SystemExit as e:
        finished(_exit_code(e.code))
        raise
    except KeyboardInterrupt:
        finished(-signal.SIGINT)  # Python ends by SIGINT after printing the traceback
        raise
    except BaseException as e:  # noqa: BLE001 - printed as Python would, without this file's frames
        tb = _user_traceback(e.__traceback__)
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        finished(1)
        sys.exit(1)
    finished(0)


if __name__ == "__main__":
    main(sys.argv[1:])
