"""The structure of the user's code around a line, read with Python's ``ast``: what a rank may have skipped.

A rank waits in a collective at line 131 of ``finish()``; its peer ran its script to the end without making that
call.  If ``finish()`` holds a ``return`` under an ``if`` before line 131 (``if not self.exports: return``), the peer
took it: the condition held there and not here, and the call every rank must make was skipped.  The test decides
nothing by names: any condition, any variables, read from the tree of the function that holds the line.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

__all__ = ["EarlyExit", "early_exit_before"]


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
