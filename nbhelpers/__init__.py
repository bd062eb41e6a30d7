"""Helpers for the distributed-training troubleshooting workbook.

    import nbhelpers as nb
    res = nb.probe(2, fault="stall")        # a RunResult: status, culprit, failure, remedies, logs
    nb.record(res, expect="fail")           # hand the verdict to the incident report

The package is layered, each layer importing only from those below it (``tests/test_layers.py``):
``diagnosis`` (pure functions over text, exit records, events and stacks: the verdict model, culprit
rules, classifier, catalogs, parsers) <- ``runtime`` (torchrun launch, rank shim, processes, ports,
events) <- ``scenarios`` (the kernel side of each incident) <- ``views`` (tables, charts, widgets) <-
``report``.  ``checkpoint`` and ``chunked`` are utilities for users' own training code; ``errors``
is the one exception root; ``workers`` are the rank programs.

Names say what comes back.  A function named after an incident or an experiment (``probe``, ``race``,
``sweep``, ``timeouts``, ``desync_scenario``, ``supervise``, ``launch``) starts ranks and returns a
``RunResult``; ``*_gallery`` runs several and returns a ``Gallery`` (a table plus its runs); ``*_table``
returns a pandas DataFrame, ``*_chart`` and ``*timeline`` a plotly figure; ``check_*``, ``lint_*``,
``parse_*``, ``classify*`` and ``find_*`` read what they are given and start nothing.

Importing this package starts nothing and imports neither torch nor plotly: the public names are listed
once, in ``__init__.pyi``, and each is loaded from its module when first used.
"""
from __future__ import annotations

__version__ = "0.1.0"

def _exports() -> dict[str, tuple[str, str]]:
    """Public name -> (module under nbhelpers, attribute), read from ``__init__.pyi``: the one list of them."""
    import ast
    from pathlib import Path

    tree = ast.parse(Path(__file__).with_suffix(".pyi").read_text())
    return {alias.asname or alias.name: (node.module.removeprefix("nbhelpers."), alias.name)
            for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names}


_EXPORTS = _exports()
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    spec = _EXPORTS.get(name)
    if spec is None:
        raise AttributeError(f"module 'nbhelpers' has no attribute {name!r}")
    import importlib

    module, attr = spec
    value = getattr(importlib.import_module(f"nbhelpers.{module}"), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
