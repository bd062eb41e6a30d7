"""What a scenario that starts several runs returns: the table to look at, and the runs behind it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Gallery"]


@dataclass
class Gallery:
    """Runs of one scenario side by side.

    ``table`` is a DataFrame with one row per run (or per measurement); ``runs`` maps each row's key to
    what produced it (a :class:`~nbhelpers.runtime.launcher.RunResult`, or a lab scenario); ``summary``
    holds counts a scenario adds.  The table's own API is reachable on the gallery itself
    (``gallery.loc[...]``, ``gallery["status"]``), so a notebook reads it like the DataFrame it shows.
    """
    table: Any
    runs: dict[str, Any] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.table, name)

    def __getitem__(self, key):
        return self.table[key]

    def __len__(self) -> int:
        return len(self.table)

    def __repr__(self) -> str:
        return f"<Gallery {len(self.table)} rows, runs: {', '.join(map(str, self.runs)) or 'none'}>\n{self.table!r}"

    def _repr_html_(self) -> str:
        return self.table._repr_html_()
