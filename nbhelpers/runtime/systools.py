"""The system tools the workbook uses beyond Python: which are here, what each is for, how to get them.

    python -m nbhelpers.runtime.systools      # one line per missing tool; `make setup` prints it

Everything that needs a missing tool skips with one sentence that names it; nothing fails for its lack.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass

__all__ = ["Tool", "TOOLS", "missing", "report"]


@dataclass(frozen=True)
class Tool:
    commands: tuple[str, ...]   # any one of them will do
    package: str                # the Debian package that brings it
    used_for: str

    @property
    def present(self) -> bool:
        return any(shutil.which(c) for c in self.commands)

    @property
    def name(self) -> str:
        return " or ".join(self.commands)


TOOLS = (
    Tool(("ip",), "iproute2", "notebook 05's two-host lab (network namespaces, veth)"),
    Tool(("tc",), "iproute2", "notebook 05's bandwidth cap"),
    Tool(("nft", "iptables"), "nftables", "notebook 05's firewall faults (a dropped or rejected rendezvous port)"),
    Tool(("chromium",), "chromium", "the real-browser tests (tests/test_browser.py)"),
)
INSTALL = "make sysdeps"


def missing() -> list[Tool]:
    return [t for t in TOOLS if not t.present]


def report() -> str:
    gone = missing()
    if not gone:
        return "optional system tools: all present"
    lines = [f"optional system tool missing: {t.name}, for {t.used_for}: skipped with a note" for t in gone]
    pkgs = " ".join(dict.fromkeys(t.package for t in gone))
    return "\n".join(lines + [f"to install them (root, Debian): {INSTALL}   # apt-get install -y {pkgs}"])


if __name__ == "__main__":
    print(report())
