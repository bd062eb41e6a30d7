"""The structure of the user's code around a line, read with Python's ``ast``: what a rank may have skipped.

A rank waits in a collective at line 131 of ``finish()``; its peer ran its script to the end without making that
call.  If ``finish()`` holds a ``return`` under an ``if`` before line 131 (``if not self.exports: return``), the peer
took it: the condition held there and not here, and the call every rank must make was skipped.  The test decides
nothing by names: any condition, any variables, read from the tree of the function that holds the line.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

__all__ = ["EarlyExit", "MappedRewrite", "early_exit_before", "mapped_rewrites", "sigbus_doc"]


@dataclass(frozen=True)
class EarlyExit:
    """A ``return`` under a condition, in the function that holds a later line."""
    func: str
    line: int            # the return's line
    guard_line: int      # the condition's line
    guard: str           # the condition's source text


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _holds(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def early_exit_before(source: str, line: int) -> EarlyExit | None:
    """The last ``return`` under an ``if`` that the function holding ``line`` (1-based) of ``source`` runs before it,
    where the ``if`` does not hold ``line`` itself (a rank that took it cannot have reached ``line``), or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    funcs = [f for f in _functions(tree) if _holds(f, line)]
    if not funcs:
        return None
    func = max(funcs, key=lambda f: f.lineno)   # the innermost
    found = None

    def visit(node: ast.AST, guard: ast.If | None) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # its returns leave another function
            if not hasattr(child, "lineno") or (child.lineno >= line and not _holds(child, line)):
                continue  # no statement, or after the line: not on the way to it
            g = child if isinstance(child, ast.If) and not _holds(child, line) else guard
            if isinstance(child, ast.Return) and g is not None and child.lineno < line:
                if found is None or child.lineno > found[0].lineno:
                    found = (child, g)
            visit(child, g)

    visit(func, None)
    if found is None:
        return None
    ret, guard = found
    test = ast.get_source_segment(source, guard.test) or "..."
    return EarlyExit(func.name, ret.lineno, guard.lineno, f"if {test}")


@dataclass(frozen=True)
class MappedRewrite:
    """A call that creates or overwrites a memory-mapped file (``np.memmap(path, mode="w+")``)."""
    line: int
    func: str            # the function it is in ("<module>" at the top level)
    call: str            # its source text, shortened
    guard_line: int | None   # the condition it runs under (in its function, or around a call of its function)
    guard: str | None
    says: str            # what the library documents about it
    source: str


@lru_cache(maxsize=1)
def _mapped() -> dict:
    return json.loads(resources.files("nbhelpers").joinpath("data/mapped_rewrites.json").read_text())


def sigbus_doc() -> tuple[str, str]:
    """What mmap(2) says of SIGBUS on a mapped file, and where."""
    d = _mapped()["sigbus"]
    return d["says"], d["source"]


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _mode(call: ast.Call, entry: dict) -> str | None:
    arg = next((k.value for k in call.keywords if k.arg == entry["mode_keyword"]), None)
    if arg is None and len(call.args) > entry["mode_position"]:
        arg = call.args[entry["mode_position"]]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def mapped_rewrites(source: str) -> list[MappedRewrite]:
    """The calls in ``source`` that create or overwrite a memory-mapped file (the catalog
    ``nbhelpers/data/mapped_rewrites.json``), each with the ``if`` it runs under: one around it in its function, else
    one around a call of its function elsewhere in the file (``if fabric.is_global_zero: build_corpus(...)``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}

    def up(node):  # the innermost if holding node, and its function (stopping there)
        guard, n = None, node
        while n in parents:
            n = parents[n]
            if isinstance(n, ast.If) and guard is None:
                guard = n
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return guard, n
        return guard, None

    def text(node, width=90):
        t = " ".join((ast.get_source_segment(source, node) or "").split())
        return t if len(t) <= width else t[:width - 1] + "…"

    found = []
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        entry = next((e for e in _mapped()["rewrites"] if _callee(call) in e["names"]), None)
        if entry is None or _mode(call, entry) not in entry["modes"]:
            continue
        guard, func = up(call)
        if guard is None and func is not None:  # the function's callers in this file, under a condition
            guard = next((g for c in ast.walk(tree) if isinstance(c, ast.Call) and _callee(c) == func.name
                          for g in [up(c)[0]] if g is not None), None)
        found.append(MappedRewrite(call.lineno, func.name if func else "<module>", text(call),
                                   guard.lineno if guard else None, f"if {text(guard.test)}" if guard else None,
                                   entry["says"], entry["source"]))
    return sorted(found, key=lambda m: m.line)
