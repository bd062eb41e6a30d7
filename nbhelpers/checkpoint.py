"""Checkpoints that are never seen half-written: atomic save, verified load, keep-last-K, manifest.

``torch.save(obj, path)`` opens ``path``, truncates it and writes for as long as the state takes:
a rank that loads it meanwhile, a copy, or a crash in between sees a torn zip archive
(``failed finding central directory``, ``EOFError``, ``UnpicklingError`` ...).  Here::

    atomic_save(state, "ckpt.pt")            # temp file in the same dir, flush, fsync, os.replace, fsync dir
    state = safe_load("ckpt.pt")             # checks the zip end record first; clear error if torn

    mgr = CheckpointManager("ckpts", keep=3) # ckpt-00000100.pt ... + manifest.json (sha256, size, step)
    mgr.save(state, step=100)
    state, entry = mgr.load_latest()         # newest checkpoint that verifies and loads; older ones otherwise

The guarantee (tested by SIGKILLing a writer mid-save many times): after any crash of the writer,
``load_latest`` returns the last checkpoint whose save completed, and no temp file outlives the
next save or load.  Single writer per directory (rank 0); any number of readers.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import struct
import time
import uuid
from pathlib import Path
from typing import Any

from nbhelpers.errors import WorkbookError

EOCD = b"PK\x05\x06"          # zip "end of central directory" signature: the last thing torch.save writes
EOCD_MIN = 22                 # its size without a comment
MANIFEST = "manifest.json"
TEMP_MARK = ".tmp-"
TEMP_NAME = re.compile(r"^\..+\.tmp-(?P<host>[^-]+)-(?P<pid>\d+)-[0-9a-f]+$")


class CheckpointError(WorkbookError):
    """A checkpoint could not be loaded (torn, truncated, checksum mismatch, none left)."""


# --- low-level: durable writes ----------------------------------------------------------------

def _host() -> str:
    return socket.gethostname().split(".")[0].replace("-", "_") or "host"


def temp_path(path: str | os.PathLike) -> Path:
    """A unique temp name in the target's own directory (``os.replace`` is atomic only within one filesystem)."""
    p = Path(path)
    return p.with_name(f".{p.name}{TEMP_MARK}{_host()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")


def fsync_dir(directory: str | os.PathLike) -> None:
    """Make a rename or unlink in ``directory`` durable (the entry lives in the directory, not the file)."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _replace_from(write, path: Path, fsync: bool) -> None:
    """Write through ``write(fh)`` into a temp file beside ``path``, then atomically put it in place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if fsync:
        fsync_dir(path.parent)


class _Hashing:
    """A write-only file wrapper that hashes the bytes on their way (torch.save writes file objects
    sequentially: write and flush only), so the checksum costs no second read of the file."""

    def __init__(self, fh):
        self.fh, self.hash = fh, hashlib.sha256()

    def write(self, data) -> int:
        self.hash.update(data)
        return self.fh.write(data)

    def flush(self) -> None:
        self.fh.flush()


def atomic_save(obj: Any, path: str | os.PathLike, *, fsync: bool = True) -> Path:
    """``torch.save`` that readers never see half-done: a temp file in the same directory, flush,
    fsync, ``os.replace`` onto ``path``, fsync of the directory.  Readers see the old file or the new
    one, never a torn one; a crash leaves at most a temp file, removed by the next save or load."""
    return _atomic_save(obj, Path(path), fsync, False)[0]


def _atomic_save(obj: Any, path: Path, fsync: bool, checksum: bool) -> tuple[Path, str | None]:
    import torch

    digest: list[str] = []

    def write(fh):
        out = _Hashing(fh) if checksum else fh
        torch.save(obj, out)
        if checksum:
            digest.append(out.hash.hexdigest())

    _replace_from(write, path, fsync)
    return path, (digest[0] if digest else None)


def atomic_write_text(text: str, path: str | os.PathLike, *, fsync: bool = True) -> Path:
    path = Path(path)
    _replace_from(lambda fh: fh.write(text.encode()), path, fsync)
    return path


# --- checks ------------------------------------------------------------------------------------

def has_end_record(path: str | os.PathLike) -> bool:
    """Whether the file ends with a zip end-of-central-directory record (torch.save writes it last).

    Cheap (reads at most the last 64 KiB): a file still being written, truncated by a copy or cut
    short by a full disk has none.  It does not prove the middle is intact: use a checksum for that.
    """
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size < EOCD_MIN:
                return False
            n = min(size, EOCD_MIN + 0xFFFF)
            fh.seek(size - n)
            tail = fh.read(n)
    except OSError:
        return False
    at = tail.rfind(EOCD)
    while at >= 0:
        if at + EOCD_MIN <= len(tail):
            (comment_len,) = struct.unpack_from("<H", tail, at + 20)
            if at + EOCD_MIN + comment_len == len(tail):
                return True
        at = tail.rfind(EOCD, 0, at)
    return False


def sha256_file(path: str | os.PathLike, chunk: int = 8 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def verify(path: str | os.PathLike, sha256: str | None = None, size: int | None = None) -> str | None:
    """None when ``path`` looks whole (exists, size and checksum as expected, zip end record present);
    otherwise the reason in words."""
    p = Path(path)
    if not p.exists():
        return f"{p} does not exist"
    actual = p.stat().st_size
    if size is not None and actual != size:
        return f"{p.name} has {actual} bytes, the manifest says {size}: truncated or still being written"
    if not has_end_record(p):
        return (f"{p.name} ({actual} bytes) has no zip end record: still being written, truncated by a copy, "
                "or cut short by a full disk")
    if sha256 is not None and sha256_file(p) != sha256:
        return f"{p.name}: sha256 differs from the manifest (corrupted after it was written)"
    return None


def safe_load(path: str | os.PathLike, *, sha256: str | None = None, map_location="cpu", **load_kw) -> Any:
    """``torch.load`` after :func:`verify`: a torn file raises :class:`CheckpointError` saying why,
    instead of a miniz error; torch's own error is chained when the load itself fails."""
    import torch

    problem = verify(path, sha256)
    if problem:
        raise CheckpointError(f"not loading {path}: {problem}",
                              "if another rank is writing it, wait for it (save atomically, then barrier); "
                              "else compare its size with the source and copy it again, and check free disk space.")
    try:
        return torch.load(path, map_location=map_location, **load_kw)
    except Exception as exc:
        raise CheckpointError(f"torch.load({path}) failed although the file looks whole: "
                              f"{type(exc).__name__}: {str(exc)[:300]}",
                              "check the checksum against where the file came from; try an older checkpoint.") from exc


def explain_torn(path: str | os.PathLike, *, expected_size: int | None = None, watch_s: float = 0.5) -> dict:
    """Why a checkpoint will not load, from the file alone: still being written, cut short by a full
    disk, truncated by a copy, or whole.  Watches the size for ``watch_s`` seconds; ``expected_size``
    is the source's size when the file was copied or downloaded."""
    p = Path(path)
    if not p.exists():
        return {"path": str(p), "verdict": "missing", "why": "no such file (not written yet?)"}
    s1, m1 = p.stat().st_size, p.stat().st_mtime
    time.sleep(watch_s)
    st = p.stat()
    disk = shutil.disk_usage(p.parent)
    out = {"path": str(p), "size": st.st_size, "grew_while_watched": st.st_size != s1,
           "modified_s_ago": round(time.time() - st.st_mtime, 3), "end_record": has_end_record(p),
           "fs_free": disk.free, "fs_total": disk.total, "expected_size": expected_size}
    if out["end_record"] and (expected_size is None or expected_size == st.st_size):
        out.update(verdict="whole", why="the zip end record is there; if torch.load still fails, compare checksums")
    elif st.st_size != s1:
        out.update(verdict="being written", why="it grew while watched: a writer is still at it (a race): save "
                   "atomically and barrier before loading")
    elif disk.free < max(1 << 20, disk.total // 100):
        out.update(verdict="full disk", why=f"no zip end record and its filesystem has {disk.free} bytes free: the "
                   "save was cut short (the writer's log says `unexpected pos` or `file write failed`)")
    elif expected_size is not None and st.st_size < expected_size:
        out.update(verdict="truncated copy", why=f"{st.st_size} of {expected_size} bytes and not growing: copy or "
                   "download it again (compare sizes/checksums)")
    elif st.st_mtime != m1 or out["modified_s_ago"] < 2 * watch_s:
        out.update(verdict="being written", why="modified just now: a writer is probably still at it (a race): save "
                   "atomically and barrier before loading")
    else:
        out.update(verdict="truncated", why="no zip end record, not growing, disk not full: an interrupted copy or "
                   "download, or a writer that died mid-save")
    return out


# --- temp files left by crashed writers ---------------------------------------------------------

def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temps(directory: str | os.PathLike, older_than_s: float = 3600.0) -> list[Path]:
    """Temp files whose writer is gone: on this host, its pid is dead; from another host (a shared
    filesystem), untouched for ``older_than_s``.  A live writer's temp file is never listed."""
    d = Path(directory)
    if not d.is_dir():
        return []
    out, now, me = [], time.time(), _host()
    for p in d.iterdir():
        m = TEMP_NAME.match(p.name)
        if not m:
            continue
        if m["host"] == me:
            if int(m["pid"]) != os.getpid() and not _pid_alive(int(m["pid"])):
                out.append(p)
        else:
            try:
                if now - p.stat().st_mtime > older_than_s:
                    out.append(p)
            except FileNotFoundError:
                pass
    return out


def clean_temps(directory: str | os.PathLike) -> list[str]:
    """Remove :func:`stale_temps`; returns the names removed."""
    removed = []
    for p in stale_temps(directory):
        p.unlink(missing_ok=True)
        removed.append(p.name)
    return removed


# --- the manager ---------------------------------------------------------------------------------

class CheckpointManager:
    """Keep-last-K checkpoints in one directory with a manifest (step, file, size, sha256).

    Order of a save, so that a crash at any instant leaves a loadable "latest":
    1. state -> temp file, fsync, ``os.replace`` to ``<prefix>-<step>.pt``, fsync dir (atomic_save);
    2. manifest (the new entry added) -> temp, fsync, ``os.replace``, fsync dir: the commit point;
    3. only then delete checkpoints that fell out of the last K, and leftovers of crashed saves.
    Before step 2 completes the manifest still names the previous checkpoint, whose file is intact.
    """

    def __init__(self, directory: str | os.PathLike, keep: int = 3, prefix: str = "ckpt", checksum: bool = True,
                 fsync: bool = True):
        if keep < 1:
            raise ValueError("keep must be >= 1")
        self.dir, self.keep, self.prefix = Path(directory), keep, prefix
        self.checksum, self.fsync = checksum, fsync
        self.name_re = re.compile(rf"^{re.escape(prefix)}-(\d+)\.pt$")

    def __repr__(self) -> str:
        latest = self.latest()
        return (f"<CheckpointManager {self.dir} keep={self.keep} "
                f"latest={'none' if latest is None else latest['step']}>")

    @property
    def manifest_path(self) -> Path:
        return self.dir / MANIFEST

    def file_for(self, step: int) -> Path:
        return self.dir / f"{self.prefix}-{step:08d}.pt"

    def entries(self) -> list[dict]:
        """Manifest entries, oldest first ([] when there is no manifest or it is unreadable)."""
        try:
            data = json.loads(self.manifest_path.read_text())
            return sorted(data["checkpoints"], key=lambda e: e["step"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            return []

    def latest(self) -> dict | None:
        entries = self.entries()
        return entries[-1] if entries else None

    def save(self, state: Any, step: int) -> dict:
        """Save ``state`` as checkpoint ``step``; returns its manifest entry."""
        self.dir.mkdir(parents=True, exist_ok=True)
        clean_temps(self.dir)
        old = self.entries()
        if any(e["step"] == step for e in old):  # re-saving a step: drop it from the manifest before its file changes
            atomic_write_text(json.dumps({"checkpoints": [e for e in old if e["step"] != step]}, indent=1),
                              self.manifest_path, fsync=self.fsync)
        path, digest = _atomic_save(state, self.file_for(step), self.fsync, self.checksum)
        entry = {"step": int(step), "file": path.name, "size": path.stat().st_size, "time": time.time(),
                 "sha256": digest}
        entries = [e for e in self.entries() if e["step"] != step] + [entry]
        entries.sort(key=lambda e: e["step"])
        kept = entries[-self.keep:]
        atomic_write_text(json.dumps({"checkpoints": kept}, indent=1), self.manifest_path, fsync=self.fsync)
        self._prune({e["file"] for e in kept})
        return entry

    def _prune(self, keep_files: set[str]) -> None:
        removed = False
        for p in self.dir.iterdir():
            if self.name_re.match(p.name) and p.name not in keep_files:
                p.unlink(missing_ok=True)
                removed = True
        if removed and self.fsync:
            fsync_dir(self.dir)

    def load_latest(self, *, map_location="cpu", verify_checksum: bool = True, **load_kw) -> tuple[Any, dict]:
        """The newest checkpoint that verifies and loads, with its entry; older ones if it does not.

        Without a manifest (or with an unreadable one) the ``<prefix>-<step>.pt`` files are tried,
        newest first, each checked for its zip end record.  Raises :class:`CheckpointError` when
        nothing loads, listing what was tried and why it failed.
        """
        clean_temps(self.dir)
        candidates = self.entries()
        if not candidates and self.dir.is_dir():
            candidates = sorted(({"step": int(m.group(1)), "file": p.name, "size": None, "sha256": None}
                                 for p in self.dir.iterdir() if (m := self.name_re.match(p.name))),
                                key=lambda e: e["step"])
        tried = []
        for e in reversed(candidates):
            path = self.dir / e["file"]
            problem = verify(path, e.get("sha256") if verify_checksum else None, e.get("size"))
            if problem is None:
                try:
                    import torch

                    return torch.load(path, map_location=map_location, **load_kw), e
                except Exception as exc:  # a whole-looking file torch still rejects
                    problem = f"{type(exc).__name__}: {str(exc)[:200]}"
            tried.append(f"step {e['step']}: {problem}")
        raise CheckpointError(f"no loadable checkpoint in {self.dir}" + (": " + "; ".join(tried) if tried else
                                                                         " (it holds none)"),
                              "start from scratch, or restore the directory from a backup.")
