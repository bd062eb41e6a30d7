"""What a run folder holds, read back: each rank's log as it grows, the logs of a finished job (a workbook run's
folder or torchrun's ``--log-dir``), the user's source the ranks point at, and the ranks' collective records
(asked for while they run, compared once written).  The launcher, the hang watch, ``attach`` and ``doctor DIR``
read runs through these.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Sequence

from nbhelpers.diagnosis.culprit import RankView, exit_records
from nbhelpers.diagnosis.structure import imported_modules
from nbhelpers.runtime import procs
from nbhelpers.runtime.events import parse_line

__all__ = ["LogTail", "ask_for_records", "collective_record", "read_log_dir", "read_run_dir", "read_sources"]


class LogTail:
    """Reads a growing log file incrementally; keeps its lines and the events found in them."""

    def __init__(self, path: Path):
        self.path, self.offset, self.partial = path, 0, b""
        self.lines: list[str] = []
        self.events: list[dict] = []

    def poll(self) -> bool:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return False
        if not data:
            return False
        self.offset += len(data)
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        for raw in chunks:
            line = raw.decode(errors="replace")
            event = parse_line(line)
            if event is not None:
                self.events.append(event)
            else:
                self.lines.append(line)
        return True

    @property
    def text(self) -> str:
        return "\n".join(self.lines + ([self.partial.decode(errors="replace")] if self.partial else []))


def read_sources(views: list[RankView], search: Sequence[str | os.PathLike] = ()) -> dict[str, str]:
    """The user's source files that the ranks' tracebacks and stacks point at, the script they ran and the modules of
    its own it imports (path as written -> text), read where they are, else by name from ``search`` folders (a run
    recorded elsewhere); 1 MB at most each."""
    found: dict[str, str] = {}
    read_at: dict[str, Path] = {}   # where each was read
    for v in views:
        files = [f.file for w in (v.where, v.traceback, v.position) if w for f in w.frames if not f.library]
        argv = v.record.get("argv") or []
        files += [argv[0]] if argv and argv[0].endswith(".py") else []
        for file in files:
            if file in found:
                continue
            for cand in [Path(file), *(Path(d) / Path(file).name for d in search)]:
                try:
                    if cand.is_file() and cand.stat().st_size < 1 << 20:
                        found[file] = cand.read_text(errors="replace")
                        read_at[file] = cand
                        break
                except OSError:
                    continue
    scripts = {argv[0] for v in views if (argv := v.record.get("argv") or []) and argv[0] in found}
    for script in scripts:
        _read_local_modules(script, found, read_at[script].parent)
    return found


def _read_local_modules(script: str, found: dict[str, str], root: Path, most: int = 40) -> None:
    """Add to ``found`` the modules of the user's own that ``script`` imports, directly or through each other: files
    in the script's folder ``root`` (where it was read) or its packages (``from projkit.trainer import Trainer`` ->
    ``projkit/trainer.py``), never installed libraries; ``most`` files at most."""
    todo, seen = [script], {os.path.realpath(p) for p in found}
    where = {script: root / Path(script).name}
    while todo and len(found) < most:
        path = todo.pop()
        here = where.get(path, Path(path)).parent
        for level, name in imported_modules(found[path]):
            if level > len(here.parents) + 1:
                continue
            bases = [root] if level == 0 else [here.parents[level - 2] if level > 1 else here]
            rel = Path(*name.split(".")) if name else Path()
            for cand in [c for base in bases for c in (base / rel.with_suffix(".py") if name else None,
                                                       base / rel / "__init__.py") if c is not None]:
                try:
                    if os.path.realpath(cand) not in seen and cand.is_file() and cand.stat().st_size < 1 << 20:
                        found[str(cand)] = cand.read_text(errors="replace")
                        seen.add(os.path.realpath(cand))
                        todo.append(str(cand))
                except OSError:
                    continue


def read_run_dir(log_dir: str | os.PathLike) -> tuple[list[RankView], str]:
    """A finished run's directory read back as the verdict sees it: one RankView per ``rank<N>.log`` (its
    events and other lines, its exit record ``rank<N>.json``, its stack dump ``rank<N>.stack.txt``), and
    torchrun's own log.  Works on any run the shim recorded, also one copied from another machine."""
    d = Path(log_dir)
    views = []
    for log in sorted(d.glob("rank*.log"), key=lambda p: int(p.stem[4:])):
        r = int(log.stem[4:])
        tail = LogTail(log)
        tail.poll()
        rec = json.loads(p.read_text()) if (p := d / f"rank{r}.json").exists() else {}
        stack = p.read_text() if (p := d / f"rank{r}.stack.txt").exists() else ""
        views.append(RankView(r, tail.events, rec, tail.text, stack))
    torchrun = d / "torchrun.log"
    return views, torchrun.read_text(errors="replace") if torchrun.exists() else ""


def read_log_dir(log_dir: str | os.PathLike, launcher_log: str = "") -> tuple[list[RankView], str]:
    """The ranks' logs of a finished job, from a folder a user brings: a workbook run's folder (:func:`read_run_dir`),
    or the one ``torchrun --log-dir DIR`` fills (``<run id>/attempt_<n>/<local rank>/stdout.log`` and ``stderr.log``;
    the last attempt is read, each rank's stdout then its stderr).  ``launcher_log`` is torchrun's own output (the
    job's console or Slurm file): its failure report gives the exit records those folders lack."""
    d = Path(log_dir)
    if any(d.glob("rank*.log")):
        views, torchrun_log = read_run_dir(d)
        return views, torchrun_log + launcher_log
    attempts = sorted(d.glob("**/attempt_*"), key=lambda p: (p.stat().st_mtime, p.name))
    if not attempts:
        raise FileNotFoundError(f"{d}: neither a workbook run folder (rank<N>.log) nor a torchrun --log-dir folder "
                                "(<run id>/attempt_<n>/<local rank>/stderr.log)")
    found = exit_records(launcher_log)
    global_of = {rec["local_rank"]: r for r, rec in found.items()}
    views = []
    for rank_dir in sorted((p for p in attempts[-1].iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name)):
        text = "".join((rank_dir / f).read_text(errors="replace") for f in ("stdout.log", "stderr.log")
                       if (rank_dir / f).exists())
        r = global_of.get(int(rank_dir.name), int(rank_dir.name))
        views.append(RankView(r, [], found.get(r, {}), text, ""))
    return views, launcher_log


def ask_for_records(fr_dir: Path, running, wait: float = 1.5) -> None:
    """Ask the ranks of a run for their collective records now: the rank shim's thread writes ``fr/rank<R>.pkl``
    within 0.2 s of ``fr/request``, even while its rank waits in a collective.  Waits up to ``wait`` s until every
    rank ``running()`` lists has written one since the request."""
    request = fr_dir / "request"
    if not fr_dir.is_dir():
        return
    request.touch()
    asked = request.stat().st_mtime_ns
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        ranks = list(running())
        if all((p := fr_dir / f"rank{r}.pkl").exists() and p.stat().st_mtime_ns >= asked for r in ranks):
            return
        time.sleep(0.05)


def collective_record(fr_dir: Path, world: int | None) -> dict | None:
    """The ranks' collective records that the rank shim wrote to ``fr_dir`` (one Flight Recorder record per rank),
    compared: the first collective they disagree on, the ranks that never reached it
    (:func:`~nbhelpers.diagnosis.flightrec.analyse`); None when no rank wrote one (no collective, or not run under
    the shim)."""
    from nbhelpers.diagnosis.flightrec import FRDumpError, analyse, read_dumps

    if not fr_dir.is_dir() or not any(fr_dir.glob("rank*.pkl")):
        return None
    try:
        with procs.signals_deferred():  # analyse imports torch's matcher: an interrupt must not cut that import short
            return analyse(read_dumps(fr_dir), world).to_dict(table=False)
    except FRDumpError:
        return None
