"""Command line: ``python -m nbhelpers run-all`` executes the notebooks and writes a report."""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m nbhelpers", description="Distributed-training troubleshooting workbook")
    sub = p.add_subparsers(dest="cmd", required=True)
    ra = sub.add_parser("run-all", help="execute every notebook headless; write reports/<UTC>/")
    ra.add_argument("--out", help="report root (default: reports/ in the workbook)")
    args = p.parse_args(argv)
    if args.cmd == "run-all":
        from pathlib import Path

        from .report import run_all

        out = run_all(Path(args.out) if args.out else None)
        import json

        failed = [n for n in json.loads((out / "summary.json").read_text())["notebooks"] if n["status"] != "ok"]
        return 1 if failed else 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
