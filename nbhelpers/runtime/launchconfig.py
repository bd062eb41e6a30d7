"""A launch configuration: env vars plus the process-group timeout, checked, and exported for a shell.

    cfg = Config("mine", {"NCCL_DEBUG": "WARN"}, timeout_s=600)
    cfg.check()                 # raises ConfigError with the reasons when a value would fail or mislead
    print(cfg.shell_snippet())  # export lines to paste into a launch script
    print(cfg.torchrun_command("train.py", nproc=8))

The timeout is part of the config because no environment variable sets it (``NCCL_TIMEOUT`` does not
exist): it is ``init_process_group(timeout=timedelta(seconds=N))`` in the training script, and the
workbook's workers take it as ``--timeout N``.
"""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Sequence

from nbhelpers.diagnosis.lint import Finding
from nbhelpers.runtime.fingerprint import lint_env
from nbhelpers.errors import ConfigError

_WHOLE = re.compile(r"\d+")


def parse_timeout(text: str | int | float) -> tuple[int | None, str]:
    """(seconds, "") for a whole number of seconds >= 1, else (None, the reason it is refused)."""
    if isinstance(text, bool):
        return None, "a timeout must be a number of seconds, not a boolean."
    if isinstance(text, int):
        return (text, "") if text >= 1 else (None, f"{text} s: the timeout must be at least 1 second.")
    if isinstance(text, float):
        if text.is_integer() and text >= 1:
            return int(text), ""
        text = repr(text)
    raw = str(text).strip()
    if not _WHOLE.fullmatch(raw):
        return None, (f"{raw!r} is not a whole number of seconds. The process-group timeout is given in code as "
                      f"init_process_group(timeout=timedelta(seconds=N)); write N as digits only (600, not "
                      f"'10m', '600s' or '1.5'). Timeout variables read by PyTorch's getCvarInt (std::stoi) "
                      f"would silently turn '1.5' into 1.")
    value = int(raw)
    if value < 1:
        return None, "0 s: the timeout must be at least 1 second (0 would make every collective fail at once)."
    return value, ""


@dataclass
class Config:
    """One way to launch: ``env`` (what the ranks inherit) and ``timeout_s`` (init_process_group's timeout)."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    timeout_s: int = 600
    why: str = ""

    def __post_init__(self):
        self.env = {str(k): str(v) for k, v in self.env.items()}
        if isinstance(self.timeout_s, float) and self.timeout_s.is_integer():
            self.timeout_s = int(self.timeout_s)  # papermill may pass 5.0

    def findings(self, interfaces: list[dict] | None = None) -> list[Finding]:
        """Lint findings for this config's env (errors first)."""
        return lint_env(self.env, interfaces=interfaces)

    def problems(self, interfaces: list[dict] | None = None) -> list[str]:
        """The reasons this config would fail or mislead; empty when it may be launched."""
        out = [f"{f.name}={f.value}: {f.message} Fix: {f.fix}" for f in self.findings(interfaces)
               if f.level == "error"]
        _, why = parse_timeout(self.timeout_s)
        if why:
            out.append(f"timeout: {why}")
        return out

    def check(self, interfaces: list[dict] | None = None) -> "Config":
        """Raise :class:`ConfigError` with every reason when the config has errors; return self otherwise."""
        problems = self.problems(interfaces)
        if problems:
            raise ConfigError(self.name, problems)
        return self

    def variant(self, name: str, timeout_s: int | None = None, **env: str | None) -> "Config":
        """A copy with some variables changed (``None`` removes one) and, optionally, another timeout."""
        merged = dict(self.env)
        for k, v in env.items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = str(v)
        return Config(name, merged, self.timeout_s if timeout_s is None else timeout_s, self.why)

    def shell_snippet(self) -> str:
        """``export`` lines for a launch script, with the timeout as the code line it has to be."""
        lines = [f"# config {self.name!r}" + (f": {self.why}" if self.why else "")]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        lines.append(f"# no env var sets the collective timeout; in the training script: "
                     f"dist.init_process_group(backend, timeout=datetime.timedelta(seconds={self.timeout_s}))")
        return "\n".join(lines)

    def torchrun_command(self, script: str = "train.py", args: Sequence[str] = (), *, nproc: int = 2,
                         nnodes: int = 1, rdzv_endpoint: str | None = None) -> str:
        """One line: the env, then torchrun; ``script`` is a .py file or a module (``-m`` added)."""
        cmd = ["torchrun", "--nnodes", str(nnodes), "--nproc-per-node", str(nproc)]
        if rdzv_endpoint:
            cmd += ["--rdzv-backend", "c10d", "--rdzv-endpoint", rdzv_endpoint]
        cmd += [script] if script.endswith(".py") or "/" in script else ["-m", script]
        prefix = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        return " ".join(prefix + [shlex.join([*cmd, *args])])

    def worker_command(self, worker: str = "probe", nproc: int = 2) -> str:
        """The torchrun line that runs one of the workbook's workers with this config, timeout included."""
        return self.torchrun_command(f"nbhelpers.workers.{worker}", ["--timeout", str(self.timeout_s)], nproc=nproc)
