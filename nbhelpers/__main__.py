"""Command line.

    python -m nbhelpers run-all [NOTEBOOK ...]           # execute the notebooks; reports/<UTC>/report.html
    python -m nbhelpers doctor LOG [LOG ...] [--json]    # classify pasted/saved log text ('-' = stdin)
    python -m nbhelpers doctor --fr DIR [--json]         # Flight Recorder dumps: the first collective ranks disagree on
    python -m nbhelpers attach [PID | --all] [--json]      # a job running here: every rank's stack, the culprit
    python -m nbhelpers attach --merge node0.json node1.json  # several nodes' attach --json: one verdict
    python -m nbhelpers attach --profile 20 [--json]   # a slow job: the rank the others wait for
    python -m nbhelpers run --nproc 2 [--timeout S] [--hang-after S] [--stop-on-hang] [--json] script.py [args ...]
    python -m nbhelpers run [--json] ... torchrun --nproc-per-node 2 train.py [args ...]   # your own launch line
    python -m nbhelpers run [--json] ... accelerate launch --num_processes 2 --multi_gpu train.py [args ...]
    python -m nbhelpers run [--json] ... deepspeed --num_gpus 2 train.py [args ...]
    python -m nbhelpers --version

Exit status, the same for every command: 0 nothing wrong found (the run passed, the log holds no failure, no rank
stands out), 1 a failure found (the run failed, the log names one, a culprit or straggler named), 2 the command
was refused before anything started (bad input); a run stopped by a signal exits 128 + its number.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path


from nbhelpers.errors import BadInput  # noqa: E402  (one line, exit 2)

EXIT_STATUS = ("exit status: 0 nothing wrong found; 1 a failure found (the run failed, the log names one, a culprit or "
               "straggler named); 2 the command was refused (bad input); 128+N a run stopped by signal N")


class Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse's own refusals: one line too, not usage + line
        raise BadInput(f"{self.prog}: {message} (see --help)")


def text_file(name: str, what: str) -> Path:
    """``name`` as a readable, non-empty text file, else BadInput saying why."""
    path = Path(name)
    if not path.exists():
        raise BadInput(f"{what} {name}: no such file")
    if path.is_dir():
        raise BadInput(f"{what} {name}: is a directory; give a file")
    try:
        with path.open("rb") as fh:
            head = fh.read(8192)
    except OSError as exc:
        raise BadInput(f"{what} {name}: cannot read it ({exc.strerror})") from None
    if not head.strip():
        raise BadInput(f"{what} {name}: the file is empty")
    if b"\0" in head:
        raise BadInput(f"{what} {name}: binary data, not text")
    return path


def positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
        if not value > 0 or value != value:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value
    return parse


def nonnegative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, not {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return value


def cmd_run_all(args) -> int:
    from nbhelpers.report.build import run_all

    books = [text_file(n, "notebook") for n in args.notebooks] or None
    out = run_all(Path(args.out) if args.out else None, books)
    return 0 if json.loads((out / "summary.json").read_text())["ok"] else 1


def doctor_dir(args) -> int:
    """``doctor DIR``: a finished job's per-rank logs (a workbook run, or ``torchrun --log-dir``), diagnosed as a
    supervised run is: the culprit rank, the failure, the line of the user's code."""
    from nbhelpers.runtime.launcher import result_from_dir
    from nbhelpers.scenarios.supervise import verdict_dict, verdict_text

    launcher = text_file(args.launcher_log, "launcher log").read_text(errors="replace") if args.launcher_log else ""
    try:
        res = result_from_dir(args.files[0], launcher)
    except FileNotFoundError as exc:
        raise BadInput(str(exc)) from None
    if not res.records and not args.json:
        print("note: no exit codes (give torchrun's own output with --launcher-log): ranks are judged by their logs "
              "alone", file=sys.stderr)
    print(json.dumps(verdict_dict(res)) if args.json else verdict_text(res), flush=True)
    return 0 if res.ok else 1


def cmd_doctor(args) -> int:
    from nbhelpers.diagnosis.classify import TAIL_BYTES
    from nbhelpers.runtime.learned import classify, classify_file, second_opinion

    if args.fr:
        from nbhelpers.diagnosis.flightrec import fr_main

        if args.files:
            raise BadInput("doctor: give log files or --fr DIR, not both")
        if not Path(args.fr).is_dir():
            raise BadInput(f"Flight Recorder folder {args.fr}: no such directory (the folder holding one dump per rank)")
        return fr_main(args.fr, args.json)
    if not args.files:
        raise BadInput("doctor: give one or more log files ('-' for stdin), or --fr DIR (see --help)")
    if len(args.files) == 1 and Path(args.files[0]).is_dir():
        return doctor_dir(args)
    if args.launcher_log:
        raise BadInput("doctor: --launcher-log goes with a folder of the ranks' logs, not with log files")
    for name in args.files:
        if name != "-":
            text_file(name, "log")
    status = 0
    for name in args.files:
        if name == "-":
            text = sys.stdin.read()
            findings, tail = classify(text), text[-TAIL_BYTES:]
        else:
            findings = classify_file(name)
            with open(name, "rb") as fh:
                fh.seek(max(0, os.path.getsize(name) - TAIL_BYTES))
                tail = fh.read().decode(errors="replace")
        second = None if findings else second_opinion(tail)
        if second is not None and not second["error_lines"] and not second["hints"]:
            second = None
        if args.json:
            if findings:
                print("\n".join(json.dumps(f.to_dict()) for f in findings[:2]))
            elif second:
                print(json.dumps({"category": None, "second_opinion": second}))
            continue
        print(f"== {name}: " + ("no known failure found" if not findings else f"{len(findings)} finding(s)"))
        for i, f in enumerate(findings[:2], 1):
            by = " (the learned model's reading: no rule matched)" if f.by == "model" else ""
            print(f"{i}. {f.category} ({f.title}), confidence {f.confidence:.2f}{by}")
            if i == 1:
                print(f"   {f.explanation}")
                for e in f.evidence:
                    print(f"   > {e}")
                for j, r in enumerate(f.remedies, 1):
                    print(f"   {j}) {r}")
        for h in (second or {}).get("hints", []):
            print(f"   worth a look, not a failure by itself: {h['title']}. {h['why']}")
            print("".join(f"   > {e}\n" for e in h["evidence"]), end="")
            print(f"   what to do then: {h['remedy']}")
        if second and second["error_lines"]:
            print("   no rule matched and the model is not confident: "
                  + ", ".join(f"{lab} {p:.2f}" for lab, p in second["top2"]))
            print("   lines that look like the error:")
            print("".join(f"   > {ln}\n" for ln in second["error_lines"][-6:]), end="")
            if second["closest"]:
                print("   closest known cases:")
                print("".join(f"   - {c['label']} ({c['similarity']:.2f}): {c['source']}\n" for c in second["closest"]), end="")
            print("   what to run next:")
            print("".join(f"   - {n}\n" for n in second["next"]), end="")
        status = status or (1 if findings else 0)
    return status


def cmd_run(args) -> int:
    from nbhelpers.runtime.launchspec import is_launch_command
    from nbhelpers.scenarios.supervise import supervise, verdict_dict, verdict_text

    command = [args.script, *args.args] if is_launch_command([args.script, *args.args]) else None
    if command is None:
        text_file(args.script, "script")
    cpus = os.cpu_count() or 1
    if args.nproc > cpus:
        print(f"warning: {args.nproc} ranks on {cpus} CPUs: they share cores, so timings and timeouts stretch",
              file=sys.stderr)
    stopped = []

    def on_term(signum, _frame):  # a Slurm time limit or scancel: end like Ctrl-C, with the verdict so far
        stopped.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        watch = dict(live=False if args.json else None, reraise=False, stop_on_hang=args.stop_on_hang,
                     hang_after=None if args.hang_after == 0 else args.hang_after)
        if command:  # the user's own torchrun / accelerate launch / deepspeed line, as they run it
            from nbhelpers.errors import WorkbookError
            from nbhelpers.runtime.launcher import launch
            from nbhelpers.runtime.launchspec import user_launch

            try:
                program = user_launch(command, "-").program
                res = launch(args.script, launcher=command, timeout=args.timeout, **watch)
            except WorkbookError as exc:
                raise BadInput(str(exc).replace("\n", "; ")) from None
            args.script = program[0] if program[0] != "-m" and Path(program[0]).is_file() else None
        else:
            res = supervise(args.script, args.args, nproc=args.nproc, timeout=args.timeout, **watch)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(json.dumps(verdict_dict(res, args.script)) if args.json else verdict_text(res, args.script), flush=True)
    if res.status == "interrupted":
        return 128 + (stopped[0] if stopped else signal.SIGINT)
    return 0 if res.ok else 1


def cmd_attach(args) -> int:
    from nbhelpers.errors import AttachError
    from nbhelpers.runtime.attach import attach, merge, merge_profiles, profile

    try:
        if args.merge:
            outputs = [json.loads(text_file(n, "attach output").read_text()) for n in args.merge]
            profiled = all("samples" in d for d in outputs)
            found = merge_profiles(outputs) if profiled else merge(outputs)
        elif args.profile:
            found = profile(args.pid, args.profile, every_job=args.all)
        else:
            found = attach(args.pid, every_job=args.all, wait=args.wait)
    except AttachError as exc:
        raise BadInput(str(exc).replace("\n", "; ")) from None
    except (ValueError, KeyError) as exc:
        raise BadInput(f"not the JSON that attach --json prints: {exc}") from None
    print(json.dumps(found.to_dict()) if args.json else found.text(), flush=True)
    named = found.straggler if hasattr(found, "straggler") else found.culprit_rank
    return 1 if named is not None else 0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nbhelpers")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def main(argv=None) -> int:
    p = Parser(prog="python -m nbhelpers", description="Distributed-training troubleshooting workbook",
               epilog=EXIT_STATUS)
    p.add_argument("--version", action="version", version=f"nbhelpers {_version()}")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    ra = sub.add_parser("run-all", help="execute every notebook headless; write reports/<UTC>/")
    ra.add_argument("--out", help="report root (default: reports/ in the workbook)")
    ra.add_argument("notebooks", nargs="*", help="notebooks to run (default: notebooks/[0-9]*.ipynb)")
    dr = sub.add_parser("doctor", help="classify failure logs (files, or - for stdin), or diagnose a folder of the "
                        "ranks' logs (torchrun --log-dir, a workbook run): the culprit rank too")
    dr.add_argument("files", nargs="*")
    dr.add_argument("--fr", metavar="DIR", help="a folder of Flight Recorder dumps, one per rank: the first collective "
                    "the ranks disagree on, and the rank missing from it")
    dr.add_argument("--json", action="store_true", help="one JSON object per finding")
    dr.add_argument("--launcher-log", metavar="FILE", help="with a folder of the ranks' logs (torchrun --log-dir, or a "
                    "workbook run): torchrun's own output, whose failure report gives each rank's exit code")
    rn = sub.add_parser("run", help="run your script on N ranks under the workbook's launcher and diagnose it")
    rn.add_argument("--nproc", type=positive(int), default=2, help="ranks on this machine")
    rn.add_argument("--timeout", type=positive(float), default=600.0, help="whole-run timeout, seconds")
    rn.add_argument("--hang-after", type=nonnegative, default=2.0, metavar="S",
                    help="name the culprit once a rank has waited S seconds in a collective while another is "
                         "elsewhere (read from py-spy stacks every 0.5 s; 0 turns it off; default 2)")
    rn.add_argument("--stop-on-hang", action="store_true", help="stop the job once a hang is named (default: "
                    "report it and let the process-group timeout end the job)")
    rn.add_argument("--json", action="store_true", help="print one JSON object")
    rn.add_argument("script", help="your script, or your own launch command: torchrun ..., python -m "
                    "torch.distributed.run ..., accelerate launch ..., deepspeed ... (its options, ranks and defaults are kept; "
                    "--nproc is then ignored)")
    rn.add_argument("args", nargs=argparse.REMAINDER)
    at = sub.add_parser("attach", help="read the stacks of a job running on this node and name the rank holding it up")
    at.add_argument("pid", nargs="?", type=positive(int), help="the job's launcher pid or any rank's pid "
                    "(default: the one job running here)")
    at.add_argument("--all", action="store_true", help="every job here, one verdict each (for --merge: this node's part of each job)")
    at.add_argument("--json", action="store_true", help="one JSON object (with each rank's stack, for --merge)")
    at.add_argument("--wait", type=nonnegative, default=0.0, metavar="S", help="keep looking (twice a second) for up "
                    "to S seconds until a hang shows (a job still starting, or not hung yet); without it attach "
                    "looks for 2.5 s: a rank must wait 2 s in a collective while another is elsewhere and idle")
    at.add_argument("--merge", nargs="+", metavar="FILE", help="one verdict over several nodes' attach --json outputs "
                    "(or attach --profile --json outputs)")
    at.add_argument("--profile", type=positive(float), default=None, metavar="S", help="a job that runs but slowly: "
                    "sample every rank twice a second for S seconds; where each rank's time goes and the rank the "
                    "others wait for (the job keeps running)")
    try:
        args = p.parse_args(argv)
        return {"run-all": cmd_run_all, "doctor": cmd_doctor, "run": cmd_run, "attach": cmd_attach}[args.cmd](args)
    except BadInput as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
