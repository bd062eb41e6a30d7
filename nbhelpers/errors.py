"""The workbook's exceptions: one base class, structured subclasses (papermill's style).

Failures of the distributed job itself are not exceptions: they are results (``RunResult``) that
name the failing stage and the culprit rank.  These are for the cases where the workbook cannot
even start or finish the job as asked.
"""
from __future__ import annotations


class WorkbookError(Exception):
    """Base class: every error raised by nbhelpers says what happened and what to do."""

    def __init__(self, what: str, todo: str = ""):
        self.what, self.todo = what, todo
        super().__init__(f"{what}\nWhat to do: {todo}" if todo else what)


class PortInUseError(WorkbookError):
    """The rendezvous port is held by another process (a squatter makes ranks hang, not fail)."""

    def __init__(self, host: str, port: int, owner: str | None):
        self.host, self.port, self.owner = host, port, owner
        who = f" by {owner}" if owner else ""
        super().__init__(f"Port {host}:{port} is already in use{who}.",
                         "pick another port (or leave port=None for a free one), or stop the process holding it; "
                         "a rank that connects to a squatter hangs instead of timing out.")


class LaunchError(WorkbookError):
    """torchrun could not be started, or exited before starting any rank."""

    def __init__(self, what: str, log_tail: str = ""):
        self.log_tail = log_tail
        super().__init__(what + (f"\n--- torchrun log (tail) ---\n{log_tail}" if log_tail else ""),
                         "read the torchrun log above; check that torch is installed in this kernel's environment.")


class ConfigError(WorkbookError):
    """A launch configuration that would fail or mislead: refused before anything is started."""

    def __init__(self, config: str, problems: list[str]):
        self.config, self.problems = config, list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"Config {config!r} was refused before launch:\n{listing}",
                         "fix the values named above (the fix is given with each), or pass check=False to run it "
                         "anyway and see the failure for real.")


class AttachError(WorkbookError):
    """No running job to attach to, or several and none chosen."""


class BadInput(WorkbookError):
    """Command-line input refused before anything starts (a missing file, a bad number): one line, exit 2."""

    def __init__(self, what: str):
        super().__init__(what)
