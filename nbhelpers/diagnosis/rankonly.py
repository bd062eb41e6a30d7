"""Collectives that only one rank makes, read from the source: a call every rank must make, under a condition that
holds on one rank only.

Both halves come from what the libraries document (``nbhelpers/data/rank_only.json``, each entry with its source):
accelerate's ``wait_for_everyone()`` is a barrier and ``is_main_process`` is true on process 0 only; Lightning's
``self.log(..., sync_dist=True)`` reduces across every process and ``trainer.is_global_zero`` is true on rank 0
only; the Hugging Face Trainer's ``evaluate()`` gathers from every process and ``state.is_world_process_zero`` holds
on process 0; any ``torch.distributed`` collective under ``dist.get_rank() == 0``.  Such a call is a collective
the other ranks never match: the job hangs until the process-group timeout, or gloo aborts on the size mismatch
when the other ranks' next collective happens to pair with it.  The frameworks defer some of these collectives (a
Lightning metric is reduced at the end of the epoch, inside Lightning's own loop), so the ranks' stacks at the hang
show only ``trainer.fit(...)``; the source shows the line.

Read structurally (Python's ``ast``): the call is in the body of an ``if`` whose test is such a condition (alone or
as one term of an ``and``), or in a function decorated ``@rank_zero_only``, or it is a call of a function of the same
file that makes such a call itself (``save_checkpoint()`` calling ``wait_for_everyone()``, called under
``if accelerator.is_main_process and ...:``).  A user's own variable names (``rank``, ``is_master``) are not read.
"""
from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

__all__ = ["RankOnlyCall", "rank_only_calls"]


@dataclass(frozen=True)
class RankOnlyCall:
    """One collective call that only the ranks a condition names make."""
    file: str
    line: int            # the line of the call under the condition
    func: str            # the function it is in
    call: str            # its source text, shortened
    guard_line: int
    guard: str           # the condition's source text
    holds_on: str        # "global rank 0", "local rank 0 of each node"
    says: str            # what the library documents about the call
    source: str          # where it documents it
    via: str | None = None   # the collective inside the called function, when the call is one of the file's own
    only: int | None = None  # the one rank that makes it, when the condition says
    but: int | None = None   # every rank but this one makes it, when the condition says
    op: str = ""             # the library call's name (``barrier``, ``save``)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line} in {self.func}: {self.call}"


@lru_cache(maxsize=1)
def _catalog() -> dict:
    return json.loads(resources.files("nbhelpers").joinpath("data/rank_only.json").read_text())


def _aliases(tree: ast.AST, module: str) -> tuple[set[str], dict[str, str]]:
    """Names bound to ``module`` (``import torch.distributed as dist``, ``from torch import distributed``), and names
    imported from it (local name -> its name there)."""
    parent, _, leaf = module.rpartition(".")
    modules, names = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == module:
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.ImportFrom) and node.module in (parent, module):
            for a in node.names:
                if node.module == parent and a.name == leaf:
                    modules.add(a.asname or a.name)
                elif node.module == module:
                    names[a.asname or a.name] = a.name
    return modules, names


def _imports(tree: ast.AST, top: str) -> bool:
    return any(isinstance(n, ast.Import) and any(a.name.split(".")[0] == top for a in n.names) or
               isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == top for n in ast.walk(tree))


class _Reader:
    def __init__(self, source: str, path: str, flow=None, external: dict | None = None, ours: frozenset = frozenset()):
        self.source, self.path, self.flow = source, path, flow
        self.external = dict(external or {})   # functions of the user's other files this one imports that make one
        self.ours = ours                        # the names of the user's own modules and packages
        self.tree = ast.parse(source)
        self.modules = {a.asname or a.name.split(".")[0] for n in ast.walk(self.tree) if isinstance(n, ast.Import)
                        for a in n.names} | {a.asname or a.name for n in ast.walk(self.tree)
                                             if isinstance(n, ast.ImportFrom) for a in n.names}
        self.aliases = {m: _aliases(self.tree, m) for m in {e["module"] for e in _catalog()["collectives"]
                                                           if "module" in e}}
        self.imported = {top: _imports(self.tree, top) for top in
                         {e["imports"] for e in _catalog()["collectives"] if "imports" in e}}
        self.built: dict[str, set[str]] = {}   # library -> the names and attributes the file binds to its objects
        for e in _catalog()["collectives"]:
            if "built_by" in e:
                self.built.setdefault(e["built_by"], _built_by(self.tree, e["built_by"]))
        self.defs: dict[str, list[ast.AST]] = {}
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs.setdefault(node.name, []).append(node)
        self.makes: dict[str, tuple[ast.Call, dict, str]] = {}   # the file's functions that make a collective
        self.settle()

    def settle(self) -> None:
        """Find, to a fixed point, the file's functions that make a collective (or call one that does)."""
        changed = True
        while changed:
            changed = False
            for name, nodes in self.defs.items():
                if name in self.makes:
                    continue
                hit = next((h for fn in nodes for c in ast.walk(fn) if isinstance(c, ast.Call)
                            and (h := self.collective(c, own=True))), None)
                if hit:
                    self.makes[name] = hit
                    changed = True

    def text(self, node: ast.AST, n: int = 100) -> str:
        t = " ".join((ast.get_source_segment(self.source, node) or "").split())
        return t if len(t) <= n else t[:n - 3] + "..."

    def collective(self, call: ast.Call, own: bool = False) -> tuple[ast.Call, dict, str] | None:
        """``(the library call, its catalog entry, its text)`` when ``call`` makes a collective; ``own``: a call of
        one of the user's own functions that makes one counts too (as the call inside it): this file's, or one of
        the user's other files this one imports (``val_mae.compute()``, defined in ``mlcore/metrics.py``)."""
        f = call.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        if name is None:
            return None
        for entry in _catalog()["collectives"]:
            if name not in entry["names"]:
                continue
            if "module" in entry:   # a function of that module, by any name the file gives it
                modules, names = self.aliases[entry["module"]]
                if isinstance(f, ast.Attribute) and (_dotted(f.value) in modules or _dotted(f.value) == entry["module"]) \
                        or isinstance(f, ast.Name) and names.get(name) == name:
                    return call, entry, self.text(call)
                continue
            if not isinstance(f, ast.Attribute) or name in self.defs and not _is_super(f.value):
                continue  # a method of the file's own of that name: read as one of its functions, below
                          # (``super().evaluate()`` in an override is the library's, not the override)
            if "receiver" in entry and _dotted(f.value).split(".")[-1] != entry["receiver"]:
                continue
            if "keyword" in entry and not any(k.arg == entry["keyword"] and isinstance(k.value, ast.Constant)
                                              and k.value.value is True for k in call.keywords):
                continue
            if "imports" in entry and not self.imported[entry["imports"]]:
                continue
            if "positional" in entry and len(call.args) != entry["positional"]:
                continue
            if "built_by" in entry and _dotted(f.value).split(".")[-1] not in self.built[entry["built_by"]]:
                continue
            return call, entry, self.text(call)
        if not own or isinstance(f, ast.Attribute) and _is_super(f.value):
            return None
        receiver = _dotted(f.value).split(".")[0] if isinstance(f, ast.Attribute) else ""
        library = receiver in self.modules and receiver not in self.ours   # ``torch.save`` beside a save() of ours
        if name in self.makes and not library:
            return self.makes[name]   # one of this file's functions, or a method of one of its classes
        if name in self.external and name not in self.defs and not library:
            return self.external[name]
        return None

    def condition(self, test: ast.AST) -> dict | None:
        """The catalog entry of the rank-only condition ``test`` is, or holds as a term of an ``and``; None."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return next((c for v in test.values if (c := self.condition(v))), None)
        for entry in _catalog()["conditions"]:
            kind = entry["kind"]
            if kind == "flag" and _flag(test) in entry["names"]:
                return entry
            if kind in ("rank_is_zero", "env_is_zero") and (v := _is_zero(test)) is not None:
                if kind == "rank_is_zero" and (_called(v) in entry["names"] or
                                               isinstance(v, ast.Attribute) and v.attr in entry["names"]):
                    return entry
                if kind == "env_is_zero" and _env_name(v) in entry["names"]:
                    return entry
        if self.flow is not None and self.flow.tainted(test) and (which := self.flow.which(test)):
            return {"kind": "rank_valued", "holds_on": f"rank {which[1]}" if which[0] == "eq" else
                    f"every rank but {which[1]}", "which": which}
        return None


def _is_super(node: ast.AST) -> bool:
    """``super()``: a method called on it is the parent class's."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"


def _flag(node: ast.AST) -> str | None:
    """``x.is_main_process`` / ``x.is_world_process_zero()`` -> the attribute's name."""
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
    return node.attr if isinstance(node, ast.Attribute) else None


def _is_zero(test: ast.AST) -> ast.AST | None:
    """The value compared with zero in ``v == 0`` / ``0 == v`` / ``not v`` / ``v == "0"``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.Eq, ast.Is)):
        a, b = test.left, test.comparators[0]
        zero = lambda n: isinstance(n, ast.Constant) and n.value in (0, "0")  # noqa: E731
        return a if zero(b) else b if zero(a) else None
    return None


def _built_by(tree: ast.AST, top: str) -> set[str]:
    """The names and attribute names this file assigns an object of library ``top`` to: ``self.val_acc =
    MulticlassAccuracy(...)`` (imported from torchmetrics) gives ``val_acc``; also ``torchmetrics.Accuracy(...)``."""
    classes, modules = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == top:
            classes |= {a.asname or a.name for a in n.names}
        elif isinstance(n, ast.Import):
            modules |= {a.asname or a.name for a in n.names if a.name.split(".")[0] == top}
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call):
            f = _dotted(n.value.func)
            if f in classes or f.split(".")[0] in modules or f.rsplit(".", 1)[0] in modules:
                for t in n.targets:
                    name = t.attr if isinstance(t, ast.Attribute) else t.id if isinstance(t, ast.Name) else None
                    if name:
                        out.add(name)
    return out


def _exits(body: list[ast.stmt]) -> bool:
    """The block always leaves its function or loop: it ends in return, raise, continue or break."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _negated(test: ast.AST) -> ast.AST | None:
    """``c`` when ``test`` is ``not c``, or ``v == 0`` when it is ``v != 0``: a guard clause's condition."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.NotEq, ast.IsNot)):
        return ast.Compare(left=test.left, ops=[ast.Eq()], comparators=test.comparators)
    return None


def _called(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
    return None


def _env_name(node: ast.AST) -> str | None:
    """``os.environ["RANK"]``, ``os.environ.get("RANK")``, ``os.getenv("RANK")``, each maybe in ``int(...)``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int" and node.args:
        node = node.args[0]
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and _dotted(node.value) == "os.environ":
        return node.slice.value
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and \
            _dotted(node.func) in ("os.environ.get", "os.getenv"):
        return node.args[0].value
    return None


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return f"{_dotted(node.value)}.{node.attr}" if isinstance(node, ast.Attribute) else ""


def _in_group(call: ast.Call) -> bool:
    """The call names a process group of its own (``group=``, ``process_group=``): a subgroup's ranks may be the
    only ones that make it."""
    return any(k.arg in ("group", "process_group", "pg") and not (isinstance(k.value, ast.Constant) and
                                                                  k.value.value is None) for k in call.keywords)


def _both_sides(r: "_Reader", node: ast.If) -> bool:
    """Both branches of the ``if`` make a collective of the same name (``broadcast`` to send on one, to receive on
    the other)."""
    def names(body):
        return {_called(h[0]) for stmt in body for c in ast.walk(stmt) if isinstance(c, ast.Call)
                and (h := r.collective(c, own=True))}
    return bool(node.orelse) and bool(names(node.body) & names(node.orelse))


def _module_names(path: str) -> set[str]:
    """The names a file is imported by: ``mlcore/metrics.py`` -> {"metrics", "mlcore"}; ``a_common.py`` ->
    {"a_common"}; a package's ``__init__.py`` -> its folder's name."""
    parts = path.replace("\\", "/").split("/")
    stem = parts[-1].removesuffix(".py")
    return {parts[-2]} if stem == "__init__" and len(parts) > 1 else {stem, *parts[-2:-1]}


def _import_parts(tree: ast.AST) -> list[tuple[int, str]]:
    """The modules ``tree`` imports, as (level, dotted name): ``import a.b`` -> (0, "a.b"); ``from a import b`` ->
    (0, "a") and (0, "a.b") (``b`` may be a module); ``from .c import d`` -> (1, "c"), (1, "c.d")."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(0, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            found += [(node.level, base)] if base else []
            found += [(node.level, f"{base}.{a.name}".lstrip(".")) for a in node.names if a.name != "*"]
    return list(dict.fromkeys(found))


def _imported_names(tree: ast.AST) -> set[str]:
    """Every name an import of the file mentions: its modules' dotted parts, and what it takes from them."""
    return {p for _, name in _import_parts(tree) for p in name.split(".")} - {""}


@lru_cache(maxsize=16)
def _project(items: tuple) -> dict[str, tuple[dict, frozenset]]:
    """For each file of the user's (``items``: (path, text) pairs), the functions of the user's other files it
    imports that make a collective, found to a fixed point across the files; and the names of the user's modules."""
    readers = {}
    for path, text in items:
        try:
            readers[path] = _Reader(text, path)
        except (SyntaxError, ValueError):
            continue
    ours = frozenset(n for p in readers for n in _module_names(p))
    imports = {p: _imported_names(r.tree) for p, r in readers.items()}
    for r in readers.values():
        r.ours = ours
    changed = True
    while changed:
        changed = False
        for p, r in readers.items():
            ext = {n: h for q, rq in readers.items() if q != p and _module_names(q) & imports[p]
                   for n, h in rq.makes.items()}
            if set(ext) - set(r.external):
                r.external.update(ext)
                r.settle()
                changed = True
    return {p: (r.external, ours) for p, r in readers.items()}


def rank_only_calls(source: str, path: str, flow=None, project: dict[str, str] | None = None) -> list[RankOnlyCall]:
    """Every collective call in ``source`` that only the rank(s) of a rank-only condition make, in the order of the
    file; [] when the source does not parse.  The conditions: those the libraries document (the catalog), and, given
    ``flow`` (a :class:`~nbhelpers.diagnosis.structure.RankFlow` of the file), any test of a value that differs by
    rank, for calls on the whole world (a call on a subgroup of its own may be meant for some ranks).  ``project``
    (path -> text of the user's files, this one among them): a call of a function of another of them that this file
    imports counts when that function makes a collective."""
    external, ours = _project(tuple(sorted(project.items()))).get(path, ({}, frozenset())) if project else \
        ({}, frozenset())
    try:
        r = _Reader(source, path, flow, external, ours)
    except (SyntaxError, ValueError):
        return []
    found: dict[int, RankOnlyCall] = {}

    # a guard: (its line, its source text, the condition's catalog entry)
    def block(body: list[ast.stmt], func: str, guard: tuple[int, str, dict] | None) -> None:
        for stmt in body:
            visit(stmt, func, guard)
            # a guard clause, "if not state.is_world_process_zero: return": the rest of the block runs only where
            # the condition holds
            if isinstance(stmt, ast.If) and not stmt.orelse and _exits(stmt.body) and \
                    (cond := _negated(stmt.test)) is not None and (entry := r.condition(cond)):
                guard = (stmt.lineno, f"if {r.text(stmt.test)}: {r.text(stmt.body[-1])}", entry)

    def visit(node: ast.AST, func: str, guard: tuple[int, str, dict] | None) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            deco = next((d for d in node.decorator_list if (_dotted(d) or _called(d) or "").split(".")[-1]
                         in _names("decorator")), None)
            entry = next(e for e in _catalog()["conditions"] if e["kind"] == "decorator") if deco else None
            block(node.body, node.name, (deco.lineno, f"@{r.text(deco)}", entry) if deco else None)
            return
        if isinstance(node, ast.If):
            entry = r.condition(node.test)
            if entry and _both_sides(r, node):
                entry = None   # the other branch makes the same collective: every rank makes one
            block(node.body, func, (node.lineno, f"if {r.text(node.test)}:", entry) if entry else guard)
            block(node.orelse, func, guard)
            return
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try)):
            if isinstance(node, ast.While):
                heads = [node.test]
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                heads = [node.iter]
            else:
                heads = [i.context_expr for i in getattr(node, "items", [])]
            for head in heads:
                visit(head, func, guard)
            for field in ("body", "orelse", "finalbody"):
                block(getattr(node, field, []), func, guard)
            for h in getattr(node, "handlers", []):
                block(h.body, func, guard)
            return
        if isinstance(node, ast.Call) and guard is not None:
            hit = r.collective(node, own=True)
            line, text, cond = guard
            if hit and node.lineno not in found and not (cond["kind"] == "rank_valued" and _in_group(hit[0])):
                inner, entry, via = hit
                which = cond.get("which") or ("eq", 0)
                found[node.lineno] = RankOnlyCall(path, node.lineno, func, r.text(node), line, text, cond["holds_on"],
                                                  entry["says"], entry["source"], None if inner is node else via,
                                                  which[1] if which[0] == "eq" else None,
                                                  which[1] if which[0] == "ne" else None, _called(inner) or "")
        for child in ast.iter_child_nodes(node):
            visit(child, func, guard)

    visit(r.tree, "<module>", None)
    # the same collective on rank k and, in the same function, on every rank but k (``if not is_main: barrier()``
    # ... ``if is_main: barrier()``, accelerate's main_process_first): every rank makes one
    both = {(c.func, c.op, c.only) for c in found.values() if c.only is not None} & \
        {(c.func, c.op, c.but) for c in found.values() if c.but is not None}
    return [c for _, c in sorted(found.items()) if (c.func, c.op, c.only) not in both and (c.func, c.op, c.but)
            not in both]


def _names(kind: str) -> set[str]:
    return {n for e in _catalog()["conditions"] if e["kind"] == kind for n in e["names"]}
