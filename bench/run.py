"""Run every bench_*.py here and print one table per benchmark (medians, ratio vs a same-run baseline).

    make bench                # or: python bench/run.py --reps 7
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def table(title: str, rows: list[dict]) -> str:
    cols = list(rows[0])
    width = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    line = lambda r: "| " + " | ".join(str(r[c]).ljust(width[c]) for c in cols) + " |"  # noqa: E731
    return "\n".join([f"\n## {title}", line({c: c for c in cols}),
                      "|" + "|".join("-" * (width[c] + 2) for c in cols) + "|", *map(line, rows)])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("only", nargs="*", help="bench module names (default: all)")
    args = p.parse_args()
    for path in sorted(HERE.glob("bench_*.py")):
        if args.only and path.stem not in args.only:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        print(f"running {path.stem} ({args.reps} reps) ...", file=sys.stderr, flush=True)
        print(table(mod.TITLE, mod.rows(args.reps)), flush=True)


if __name__ == "__main__":
    main()
