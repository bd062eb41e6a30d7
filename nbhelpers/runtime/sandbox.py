"""A small tmpfs mounted in a private mount namespace, for one command: a full disk, a tiny /dev/shm.

    reason = private_mount_unavailable()          # None when it works here (root + unshare), else why not
    argv = tmpfs_prefix("/dev/shm", "1m") + ["python", "-m", ...]

``unshare -m --propagation private`` gives the command its own copy of the mount table; the tmpfs
mounted there is seen by that command (and its children) only, and disappears with them: the host's
/dev/shm and disks are untouched, and nothing is left to unmount.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile


@functools.lru_cache(maxsize=1)
def private_mount_unavailable() -> str | None:
    """None if a tmpfs can be mounted in a private mount namespace here; otherwise the reason."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (mounting a tmpfs needs CAP_SYS_ADMIN); run the workbook as root or in a VM"
    if shutil.which("unshare") is None:
        return "the `unshare` command (util-linux) is not installed"
    with tempfile.TemporaryDirectory(prefix="nbh-mnt-") as d:
        try:
            out = subprocess.run(tmpfs_prefix(d, "64k") + ["true"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"unshare failed: {exc}"
    if out.returncode != 0:
        return ("cannot mount in a private mount namespace here (a container without CAP_SYS_ADMIN?): "
                + (out.stderr.strip() or f"exit {out.returncode}")[:200])
    return None


def tmpfs_prefix(mountpoint: str | os.PathLike, size: str) -> list[str]:
    """An argv prefix: in a private mount namespace, mount a tmpfs of ``size`` (e.g. ``"20m"``) on
    ``mountpoint``, then exec the rest of the argv."""
    return ["unshare", "-m", "--propagation", "private", "sh", "-c",
            'mount -t tmpfs -o "size=$1" tmpfs "$2" && shift 2 && exec "$@"', "sh", size, str(mountpoint)]
