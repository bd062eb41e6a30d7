"""torch.save onto a filesystem that fills up mid-save, then torch.load of what was left.

Meant to run on a small tmpfs in a private mount namespace (see :mod:`nbhelpers.runtime.sandbox`)::

    unshare -m --propagation private sh -c \\
      'mount -t tmpfs -o size=20m tmpfs /tmp/full && exec python -m nbhelpers.workers.ckpt_fulldisk --dir /tmp/full'

Events: ``save`` and ``load`` (ok, or fail with the exception torch raised) and ``inspect``
(:func:`nbhelpers.checkpoint.explain_torn` on the file left behind, seen from inside the namespace).
"""
from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path

from nbhelpers.runtime.events import emit, error_text


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m nbhelpers.workers.ckpt_fulldisk", description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--size-mb", type=float, default=50.0)
    args = p.parse_args(argv)
    import torch

    from nbhelpers.checkpoint import explain_torn

    d = Path(args.dir)
    disk = shutil.disk_usage(d)
    emit("disk", "ok", total=disk.total, free=disk.free, size_mb=args.size_mb)
    path = d / "ckpt.pt"
    n = int(args.size_mb * 2**20 / 4 / 8)
    state = {f"layer{i}.weight": torch.full((n,), float(i)) for i in range(8)}
    for name, fn in (("save", lambda: torch.save(state, path)), ("load", lambda: torch.load(path))):
        try:
            fn()
            emit(name, "ok")
        except Exception as exc:  # noqa: BLE001 - the message is the measurement
            emit(name, "fail", error_type=type(exc).__name__, error=error_text(exc))
    emit("inspect", "ok", **explain_torn(path, watch_s=0.2))
    path.unlink(missing_ok=True)
    os.sync()


if __name__ == "__main__":
    main()
