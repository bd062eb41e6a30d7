"""The structure of the user's code around a line, read with Python's ``ast``: what a rank may have skipped.

A rank waits in a collective at line 131 of ``finish()``; its peer ran its script to the end without making that
call.  If ``finish()`` holds a ``return`` under an ``if`` before line 131 (``if not self.exports: return``), the peer
took it: the condition held there and not here, and the call every rank must make was skipped.  The test decides
nothing by names: any condition, any variables, read from the tree of the function that holds the line.
"""
from __future__ import annotations

import ast
import copy
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from nbhelpers.diagnosis.rankonly import _called, _dotted, _import_parts, _names

__all__ = ["ConstantDtype", "EarlyExit", "EarlyStop", "MappedRewrite", "RankFlow", "SkippedSend", "constant_dtypes",
           "early_exit_before", "early_stop", "imported_modules", "loop_exit", "mapped_rewrites", "own_call_at",
           "project_flow", "rank_flow", "receives_at", "sends_doc", "sigbus_doc", "skipped_send"]


@dataclass(frozen=True)
class EarlyExit:
    """A ``return`` under a condition, in the function that holds a later line."""
    func: str
    line: int            # the return's line
    guard_line: int      # the condition's line
    guard: str           # the condition's source text


def _functions(tree: ast.AST):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _segment(source: str, node: ast.AST, width: int = 100) -> str:
    """``node``'s source text on one line, cut at ``width`` characters."""
    return " ".join((ast.get_source_segment(source, node) or "").split())[:width]


def _holds(node: ast.AST, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def early_exit_before(source: str, line: int, guard=None) -> EarlyExit | None:
    """The last ``return`` under an ``if`` that the function holding ``line`` (1-based) of ``source`` runs before it,
    where the ``if`` does not hold ``line`` itself (a rank that took it cannot have reached ``line``), or None.
    ``guard(if_node)``, when given, picks the ``if`` that counts among those around the return (the innermost one
    that passes is reported)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    funcs = [f for f in _functions(tree) if _holds(f, line)]
    if not funcs:
        return None
    func = max(funcs, key=lambda f: f.lineno)   # the innermost
    found = None

    def visit(node: ast.AST, guards: tuple) -> None:
        nonlocal found
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue  # its returns leave another function
            if not hasattr(child, "lineno") or (child.lineno >= line and not _holds(child, line)):
                continue  # no statement, or after the line: not on the way to it
            gs = guards + (child,) if isinstance(child, ast.If) and not _holds(child, line) else guards
            g = next((g for g in reversed(gs) if guard is None or guard(g)), None)
            if isinstance(child, ast.Return) and g is not None and child.lineno < line:
                if found is None or child.lineno > found[0].lineno:
                    found = (child, g)
            visit(child, gs)

    visit(func, ())
    if found is None:
        return None
    ret, g = found
    test = ast.get_source_segment(source, g.test) or "..."
    return EarlyExit(func.name, ret.lineno, g.lineno, f"if {test}")


def loop_exit(source: str, line: int) -> int | None:
    """The line of a ``break`` or ``return`` under an ``if`` that leaves the ``for``/``while`` loop at ``line`` (1-based)
    before its iterations run out (an early stop), or None: a loop without one ends only when its data does."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    loop = next((n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and n.lineno == line),
                None)
    if loop is None:
        return None

    def visit(node: ast.AST, guarded: bool, nested: bool) -> int | None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if guarded and (isinstance(child, ast.Return) or isinstance(child, ast.Break) and not nested):
                return child.lineno
            inner = nested or isinstance(child, (ast.For, ast.AsyncFor, ast.While))  # its breaks leave only itself
            found = visit(child, guarded or isinstance(child, ast.If), inner)
            if found:
                return found
        return None

    return visit(loop, False, False)


@dataclass(frozen=True)
class EarlyStop:
    """A loop holding a line, and the ``break``/``return`` under an ``if`` that leaves it early."""
    loop_line: int
    loop: str            # the loop's header
    exit_line: int
    guard_line: int
    guard: str           # the condition's source text


def early_stop(source: str, line: int) -> EarlyStop | None:
    """The innermost loop holding ``line`` (1-based) of ``source`` that a ``break`` or ``return`` under an ``if`` can
    leave before its iterations run out, where the ``if`` reads a value the loops compute (``if acc >= target:
    break``, not ``if step == max_steps: break`` over a counter and a setting, which every rank reaches together), as
    an :class:`EarlyStop`; None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    loops = sorted((n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While))
                    and _holds(n, line)), key=lambda n: -n.lineno)
    if not loops:
        return None
    computed = set()   # what the loops compute: names assigned in them, but counters (range targets, ``step += 1``)
    for n in ast.walk(loops[-1]):
        if isinstance(n, (ast.Assign, ast.AnnAssign)):
            computed |= {t.id for tg in (n.targets if isinstance(n, ast.Assign) else [n.target])
                         for t in ast.walk(tg) if isinstance(t, ast.Name)}
        elif isinstance(n, ast.AugAssign) and not isinstance(n.value, ast.Constant) and isinstance(n.target, ast.Name):
            computed.add(n.target.id)
        elif isinstance(n, (ast.For, ast.AsyncFor)) and not (isinstance(n.iter, ast.Call) and _called(n.iter) in
                                                             ("range", "enumerate")):
            computed |= {t.id for t in ast.walk(n.target) if isinstance(t, ast.Name)}
    text = lambda n: _segment(source, n)  # noqa: E731

    def visit(node: ast.AST, guard: ast.If | None, nested: bool):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if guard is not None and (isinstance(child, ast.Return) or isinstance(child, ast.Break) and not nested):
                return child, guard
            inner = nested or isinstance(child, (ast.For, ast.AsyncFor, ast.While))
            reads = isinstance(child, ast.If) and {n.id for n in ast.walk(child.test) if isinstance(n, ast.Name)}
            found = visit(child, child if isinstance(child, ast.If) and reads & computed else guard, inner)
            if found:
                return found
        return None

    for loop in loops:
        found = visit(loop, None, False)
        if found:
            ex, g = found
            head = (ast.get_source_segment(source, loop) or "").splitlines()[0].strip().rstrip(":")
            return EarlyStop(loop.lineno, head, ex.lineno, g.lineno, f"if {text(g.test)}")
    return None


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


def _mode(call: ast.Call, entry: dict) -> str | None:
    arg = next((k.value for k in call.keywords if k.arg == entry["mode_keyword"]), None)
    if arg is None and len(call.args) > entry["mode_position"]:
        arg = call.args[entry["mode_position"]]
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else None


def _maps(call: ast.Call) -> bool:
    """The call memory-maps a file (the catalog's "maps": ``np.load(path, mmap_mode="r")``, ``np.memmap(path)``)."""
    for entry in _mapped()["maps"]:
        if _called(call) in entry["names"]:
            if "keyword" not in entry:
                return True
            value = next((k.value for k in call.keywords if k.arg == entry["keyword"]), None)
            return value is not None and not (isinstance(value, ast.Constant) and value.value is None)
    return False


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

    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    mapped = {text(c.args[0]) for c in calls if c.args and _maps(c)}   # the paths the file maps
    found = []
    for call in calls:
        entry = next((e for e in _mapped()["rewrites"] if _called(call) in e["names"]), None)
        if entry is None or "modes" in entry and _mode(call, entry) not in entry["modes"]:
            continue
        if entry.get("of_a_mapped_file") and not (call.args and text(call.args[0]) in mapped):
            continue
        guard, func = up(call)
        if guard is None and func is not None:  # the function's callers in this file, under a condition
            guard = next((g for c in ast.walk(tree) if isinstance(c, ast.Call) and _called(c) == func.name
                          for g in [up(c)[0]] if g is not None), None)
        found.append(MappedRewrite(call.lineno, func.name if func else "<module>", text(call),
                                   guard.lineno if guard else None, f"if {text(guard.test)}" if guard else None,
                                   entry["says"], entry["source"]))
    return sorted(found, key=lambda m: m.line)


# ---- values that differ by rank -----------------------------------------------------------------------------

class RankFlow:
    """Which values of the user's source differ from rank to rank, followed through the user's own code.

    A value is rank-valued when it comes from what the libraries document as the process's rank or role (the
    catalog's conditions in ``data/rank_only.json``: ``dist.get_rank()``, ``os.environ["RANK"]``, accelerate's
    ``is_main_process``, Lightning's ``global_rank``, the Trainer's ``is_world_process_zero()``; and the first
    argument ``mp.spawn`` passes its function, the process index), or is computed from such a value: a variable or an
    attribute assigned from one (``rank = dist.get_rank()``, ``self.is_main = self.rank == 0``), a function that
    returns one (``def is_main_process(): return dist.get_rank() == 0``) or a tuple holding one (``return
    dist.get_rank(), dist.get_world_size(), out``: only that item of ``rank, world, out = setup()`` is), a parameter
    that a call passes one to (``Trainer(rank=rank)``).  The files of a project are read together (``sources``: the
    script and the modules it imports): a helper module's function or attribute is followed into the script that
    uses it, while a variable stays in its own file.  What the user named a thing is never read."""

    def __init__(self, source: str | None = None, sources: dict[str, str] | None = None, path: str = "<script>"):
        files = dict(sources or {})
        if source is not None:
            files[path] = source
        self.trees = {}
        for p, text in files.items():
            try:
                self.trees[p] = ast.parse(text)
            except (SyntaxError, ValueError):
                if p == path and source is not None:
                    raise
        self.sources = files
        self.path = path if path in self.trees else next(iter(self.trees), path)
        self.lib_names = _names("flag") | _names("rank_is_zero")
        self.env_names = _names("env_is_zero")
        self.local: dict[str, set[str]] = {p: set() for p in self.trees}   # file -> its rank-valued variables
        self.attrs: set[str] = set()
        self.funcs: set[str] = set()
        self.parts: dict[str, set[int]] = {}   # functions that return a tuple: the items that are rank-valued
        self.value_of: dict[str, ast.AST] = {}  # a rank-valued name, attribute or function: the value it was given
        defs = {}
        for tree in self.trees.values():
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    defs.setdefault(node.name, node)
                elif isinstance(node, ast.ClassDef):
                    init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
                    if init is not None:
                        defs.setdefault(node.name, init)
        size = lambda: (sum(map(len, self.local.values())), len(self.attrs), len(self.funcs),  # noqa: E731
                        sum(map(len, self.parts.values())))
        for _ in range(12):  # to a fixpoint: each round follows one more step of the code
            before = size()
            for p, tree in self.trees.items():
                for node in ast.walk(tree):
                    self._step(node, defs, p)
            if size() == before:
                break

    @property
    def names(self) -> set[str]:
        return self.local.get(self.path, set())

    def of(self, path: str) -> "RankFlow | None":
        """The same flow, read from file ``path`` (its own variables); None when that file did not parse."""
        if path not in self.trees:
            return None
        view = copy.copy(self)
        view.path = path
        return view

    @property
    def tree(self) -> ast.AST:
        return self.trees[self.path]

    @property
    def source(self) -> str:
        return self.sources[self.path]

    def _target(self, t: ast.AST, path: str, value: ast.AST | None = None) -> None:
        if isinstance(t, ast.Name):
            self.local[path].add(t.id)
        elif isinstance(t, ast.Attribute):
            self.attrs.add(t.attr)
        name = t.id if isinstance(t, ast.Name) else t.attr if isinstance(t, ast.Attribute) else None
        if name and value is not None:
            self.value_of.setdefault(name, value)

    def _step(self, node: ast.AST, defs: dict, path: str) -> None:
        tainted = lambda e: self._tainted(e, path)  # noqa: E731
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple) and len(t.elts) == len(node.value.elts):
                    for a, b in zip(t.elts, node.value.elts):
                        if tainted(b):
                            self._target(a, path, b)
                elif isinstance(t, ast.Tuple) and (parts := self.parts.get(_called(node.value) or "")):
                    for i, a in enumerate(t.elts):
                        if i in parts:
                            self._target(a, path)
                elif tainted(node.value):
                    self._target(t, path, node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None and tainted(node.value):
            self._target(node.target, path, node.value if isinstance(node, ast.AnnAssign) else None)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for r in ast.walk(node):
                if not isinstance(r, ast.Return) or r.value is None:
                    continue
                if isinstance(r.value, ast.Tuple):
                    items = {i for i, e in enumerate(r.value.elts) if tainted(e)}
                    if items:
                        self.parts.setdefault(node.name, set()).update(items)
                elif tainted(r.value):
                    self.funcs.add(node.name)
                    self.attrs.add(node.name)  # a @property, read as an attribute
                    self.value_of.setdefault(node.name, r.value)
        elif isinstance(node, ast.Call):
            name = _called(node)
            if name in ("spawn", "start_processes") and node.args and isinstance(node.args[0], (ast.Name, ast.Attribute)):
                fn = defs.get(node.args[0].id if isinstance(node.args[0], ast.Name) else node.args[0].attr)
                params = fn.args.args if fn is not None else []
                if params:
                    self._param(fn, params[0].arg)  # mp.spawn calls fn(i, *args): i is the process index
            fn = defs.get(name)
            if fn is None:
                return
            params = [a.arg for a in fn.args.args]
            if params and params[0] == "self":
                params = params[1:]
            for i, arg in enumerate(node.args):
                if i < len(params) and tainted(arg):
                    self._param(fn, params[i])
            for kw in node.keywords:
                if kw.arg in params and tainted(kw.value):
                    self._param(fn, kw.arg)

    def _param(self, fn: ast.AST, name: str) -> None:
        """A parameter of ``fn`` is rank-valued: in the file that defines it."""
        for p, tree in self.trees.items():
            if any(n is fn for n in ast.walk(tree)):
                self.local[p].add(name)
                return

    def tainted(self, expr: ast.AST) -> bool:
        """Whether ``expr`` (of this view's file) is a rank-valued value or computed from one by arithmetic,
        comparison, logic, indexing or a conversion (``int(os.environ["RANK"])``, ``rank % world == world - 1``,
        ``ROLE[rank]``).  A value that some other call computes from the rank (a DataLoader over the rank's slice, its
        loss) is the rank's data, not its role: a test on it may hold on any rank."""
        return self._tainted(expr, self.path)

    def _tainted(self, n: ast.AST, path: str) -> bool:
        if isinstance(n, ast.Name):
            return n.id in self.local[path]
        if isinstance(n, ast.Attribute):
            return n.attr in self.attrs or n.attr in self.lib_names
        if isinstance(n, ast.Call):
            name = _called(n)
            if name in self.funcs or name in self.lib_names:
                return True
            if name in ("get", "getenv") and n.args and isinstance(n.args[0], ast.Constant) \
                    and n.args[0].value in self.env_names:
                return True
            return name in ("int", "str", "bool", "float") and any(self._tainted(a, path) for a in n.args)
        if isinstance(n, ast.Subscript):
            if isinstance(n.slice, ast.Constant) and n.slice.value in self.env_names:
                return True
            return self._tainted(n.value, path) or self._tainted(n.slice, path)
        if isinstance(n, (ast.Compare, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Tuple, ast.List)):
            return any(self._tainted(c, path) for c in ast.iter_child_nodes(n) if isinstance(c, ast.expr))
        return False

    def which(self, test: ast.AST, depth: int = 0) -> tuple[str, int] | None:
        """The ranks where the rank-valued ``test`` holds, when the code says: ``("eq", k)``, rank ``k`` only
        (``rank == 0``, ``not rank``, ``is_main_process``, a ``leader`` attribute assigned ``self.rank == 0``);
        ``("ne", k)``, every rank but ``k`` (``rank != 0``, ``rank > 0``); None when it does not say (``rank %
        2 == 1``, a value from a table).  Followed through the values the code gave names, attributes and
        functions."""
        if depth > 6:
            return None
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return next((w for v in test.values if (w := self.which(v, depth + 1)) and w[0] == "eq"), None)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            inner = self.which(test.operand, depth + 1)
            if inner is not None:
                return ("ne" if inner[0] == "eq" else "eq", inner[1])
            return ("eq", 0) if self._numeric(test.operand, depth) else None
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            a, op, b = test.left, test.ops[0], test.comparators[0]
            k = _int_constant(b)
            if k is None and (k := _int_constant(a)) is not None:
                a, op = b, _FLIP.get(type(op), op)
            if k is None or not self.tainted(a) or not self._numeric(a, depth):
                return None
            kind = type(op)
            if kind in (ast.Eq, ast.Is) or kind is ast.Lt and k == 1 or kind is ast.LtE and k == 0:
                return ("eq", 0 if kind in (ast.Lt, ast.LtE) else k)
            if kind in (ast.NotEq, ast.IsNot) or kind is ast.Gt and k == 0 or kind is ast.GtE and k == 1:
                return ("ne", 0 if kind in (ast.Gt, ast.GtE) else k)
            return None
        name = _called(test) or (test.attr if isinstance(test, ast.Attribute) else test.id
                                 if isinstance(test, ast.Name) else None)
        if name in _names("flag"):
            return ("eq", 0)
        value = self.value_of.get(name) if name else None
        return self.which(value, depth + 1) if value is not None and self.tainted(test) else None

    def _numeric(self, expr: ast.AST, depth: int = 0) -> bool:
        """``expr`` is a rank number (``dist.get_rank()``, ``int(os.environ["RANK"])``, a name given one), not a
        flag."""
        if depth > 6:
            return False
        if isinstance(expr, ast.Call) and _called(expr) == "int" and expr.args:
            return self.tainted(expr.args[0])
        if _called(expr) in _names("rank_is_zero") or isinstance(expr, ast.Attribute) and \
                expr.attr in _names("rank_is_zero"):
            return True
        name = _called(expr) or (expr.attr if isinstance(expr, ast.Attribute) else expr.id
                                 if isinstance(expr, ast.Name) else None)
        if name is None:
            return False   # computed from the rank (``rank % 2``): not the rank itself
        value = self.value_of.get(name)
        if value is None:   # a parameter given a rank, a tuple item: a number unless it is a comparison's result
            return self.tainted(expr) and not isinstance(expr, ast.Compare)
        return not isinstance(value, (ast.Compare, ast.BoolOp, ast.UnaryOp)) and self._numeric(value, depth + 1)

    def _test(self, node: ast.If) -> str:
        return "if " + " ".join((ast.get_source_segment(self.source, node.test) or "...").split())

    def branch(self, line: int) -> tuple[int, str] | None:
        """The innermost ``if`` on a rank-valued test whose body holds ``line`` (1-based), as (its line, its text);
        a line in its ``else`` gives ("else of `if ...`")."""
        best = None
        for node in ast.walk(self.tree):
            if not isinstance(node, ast.If) or not _holds(node, line) or not self.tainted(node.test):
                continue
            in_body = any(_holds(b, line) for b in node.body)
            in_else = any(_holds(b, line) for b in node.orelse)
            if (in_body or in_else) and (best is None or node.lineno > best[0].lineno):
                best = (node, in_body)
        if best is None:
            return None
        node, in_body = best
        return (node.lineno, self._test(node)) if in_body else (node.lineno, f"else of `{self._test(node)}`")

    def returns_before(self, line: int) -> EarlyExit | None:
        """A ``return`` under an ``if`` on a rank-valued test that the function holding ``line`` runs before it (only
        the ranks the test lets through reach ``line``); None."""
        return early_exit_before(self.source, line, lambda g: self.tainted(g.test))


_FLIP = {ast.Lt: ast.Gt(), ast.Gt: ast.Lt(), ast.LtE: ast.GtE(), ast.GtE: ast.LtE()}


def _int_constant(node: ast.AST) -> int | None:
    """``0``, ``"0"`` -> 0; anything else that is not an integer constant -> None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, str)) and not isinstance(node.value, bool):
        try:
            return int(node.value)
        except ValueError:
            return None
    return None


@lru_cache(maxsize=64)
def rank_flow(source: str) -> RankFlow | None:
    """:class:`RankFlow` of ``source`` read alone (None when it does not parse)."""
    try:
        return RankFlow(source)
    except (SyntaxError, ValueError):
        return None


def project_flow(sources: dict[str, str]) -> RankFlow:
    """:class:`RankFlow` of the files ``sources`` (path -> text) read together; ``.of(path)`` reads one of them."""
    return _project_flow(tuple(sorted(sources.items())))


@lru_cache(maxsize=16)
def _project_flow(items: tuple) -> RankFlow:
    return RankFlow(sources=dict(items))


def imported_modules(source: str) -> list[tuple[int, str]]:
    """The modules ``source`` imports, as (level, dotted name): ``import a.b`` -> (0, "a.b"); ``from a import b`` ->
    (0, "a") and (0, "a.b") (``b`` may be a module); ``from .c import d`` -> (1, "c"), (1, "c.d"); [] when it does not
    parse.  Which of them are the user's own files is for the caller to find."""
    try:
        return _import_parts(ast.parse(source))
    except (SyntaxError, ValueError):
        return []


@dataclass(frozen=True)
class SkippedSend:
    """A conditional ``continue``/``break``/``return`` in a loop that leaves the iteration before its send."""
    loop_line: int
    exit_line: int
    guard_line: int
    guard: str           # the condition's source text
    send_line: int
    send: str            # the send's source text


def _sends(tree: ast.AST) -> tuple[set[str], dict[str, int]]:
    """The send names (the catalog's), and the file's own functions that send (name -> the line of their send)."""
    names = set(_catalog_sends()["names"])
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    own: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, fn in defs.items():
            if name not in own and (line := next((c.lineno for c in ast.walk(fn) if isinstance(c, ast.Call)
                                                  and _is_send(c, names, own)), None)):
                own[name] = line
                changed = True
    return names, own


def _is_send(call: ast.Call, names: set[str], own: dict[str, int]) -> bool:
    """``dist.send(...)``, ``dist.isend(...)``, a call given the send function itself (``P2POp(dist.isend, t, peer)``,
    ``p2p(dist.isend, t, peer)``), or a function of the file's own that makes one of these."""
    name = _called(call)
    if name in names or name in own:
        return True
    return any((a.attr if isinstance(a, ast.Attribute) else a.id if isinstance(a, ast.Name) else None) in names
               for a in call.args)


@lru_cache(maxsize=1)
def _catalog_sends() -> dict:
    return json.loads(resources.files("nbhelpers").joinpath("data/rank_only.json").read_text())["sends"]


def sends_doc() -> tuple[str, str]:
    """What torch documents of a point-to-point receive and its send, and where."""
    d = _catalog_sends()
    return d["says"], d["source"]


def skipped_send(source: str, line: int, flow: RankFlow | None = None) -> SkippedSend | None:
    """In the innermost loop of ``source`` holding ``line`` (1-based), a ``continue``, ``break`` or ``return`` under
    an ``if`` that leaves the iteration before a send to a peer later in the loop's body (the catalog's sends, or a
    function of the file's own that makes one): a rank that took it never posted the send its peer's receive waits
    for.  An ``if`` on a value that differs by rank (``flow``) is the ranks' roles parting (``if rank == 0:
    stage0(); continue``), not a skip, and does not count; nor does a skip in another role's branch than the one
    holding ``line`` (the rank's own position).  None when there is none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    loops = [n for n in ast.walk(tree) if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and _holds(n, line)]
    if not loops:
        return None
    loop = max(loops, key=lambda n: n.lineno)
    names, own = _sends(tree)
    sends = [c for stmt in loop.body for c in ast.walk(stmt) if isinstance(c, ast.Call) and _is_send(c, names, own)]
    text = lambda n: _segment(source, n)  # noqa: E731

    def ifs(node: ast.AST, nested: bool):
        """The ``if`` statements of the loop's body, each with whether it sits in a loop nested in this one."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, ast.If):
                yield child, nested
            yield from ifs(child, nested or isinstance(child, (ast.For, ast.AsyncFor, ast.While)))

    def leaves(node: ast.AST, inner: bool) -> ast.stmt | None:
        """The first statement under ``node`` that leaves this loop's iteration: a return, or (outside nested loops,
        ``inner``) a continue or break of this loop's own."""
        for c in ast.iter_child_nodes(node):
            if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.expr)):
                continue
            if isinstance(c, ast.Return) or isinstance(c, (ast.Continue, ast.Break)) and not inner:
                return c
            if (found := leaves(c, inner or isinstance(c, (ast.For, ast.AsyncFor, ast.While)))) is not None:
                return found
        return None

    def roles(at: int) -> list:
        """The branches of rank tests in the loop that hold line ``at``: a rank at one line reaches the other only
        when they are the same (``if rank == 0: ...; continue`` keeps rank 0 from the rest of the body)."""
        return [(n.lineno, any(_holds(b, at) for b in n.body)) for n in ast.walk(loop) if isinstance(n, ast.If)
                and flow is not None and flow.tainted(n.test) and _holds(n, at) and n is not loop]

    for node, nested in ifs(loop, False):
        if (flow is not None and flow.tainted(node.test)) or roles(node.lineno) != roles(line):
            continue
        ex = leaves(ast.Module(body=node.body, type_ignores=[]), nested)
        later = [c for c in sends if c.lineno > (node.end_lineno or node.lineno)]
        if ex is not None and later and not any(isinstance(c, ast.Call) and _is_send(c, names, own)
                                                for b in node.body for c in ast.walk(b)):
            return SkippedSend(loop.lineno, ex.lineno, node.lineno, f"if {text(node.test)}", later[0].lineno,
                               text(later[0]))
    return None


def receives_at(source: str, line: int) -> bool:
    """Line ``line`` (1-based) of ``source`` makes a point-to-point receive: ``dist.recv(...)``, ``dist.irecv(...)``,
    or a call given the receive function (``P2POp(dist.irecv, t, peer)``, ``p2p(dist.irecv, t, peer)``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    names = set(_catalog_sends()["receives"])
    return any(isinstance(c, ast.Call) and c.lineno <= line <= (c.end_lineno or c.lineno) and _is_send(c, names, {})
               for c in ast.walk(tree))


# ---- the dtype a tensor gets from constants in the code ---------------------------------------------------------

@dataclass(frozen=True)
class ConstantDtype:
    """A constant of the code that, reaching the tensor a collective sends, gives it a dtype of torch's choosing."""
    dtype: str           # "int64", "float32"
    line: int
    text: str            # the constant's source text (``0``, ``torch.zeros(2)``)


_FACTORIES = {"zeros", "ones", "empty", "full", "rand", "randn", "arange", "linspace"}   # default dtype without dtype=


def constant_dtypes(source: str, line: int) -> list[ConstantDtype]:
    """The constants of the code that can reach the tensor passed to the call at ``line`` (1-based; its first
    argument) of ``source``, each with the dtype torch gives a tensor built from it (its documented type inference:
    ``torch.tensor`` of Python ints is int64, of Python floats float32, the default dtype; ``torch.zeros(n)`` and the
    other factories without ``dtype=`` the default float32).  Followed through the function's variables, the file's
    attributes (``self.x = {...}``, ``self.x.append(v)``, ``self.x[k] += v``), dict and list literals, ``a if c else
    b``, and the file's own functions' returns.  [] when the source does not parse or the line holds no call."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.args and c.lineno <= line <= (c.end_lineno or
                                                                                                        c.lineno)]
    if not calls:
        return []
    call = min(calls, key=lambda c: (c.lineno != line, -c.lineno, c.col_offset))   # the line's outermost call
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    home = next((f for f in sorted(funcs.values(), key=lambda f: -f.lineno) if _holds(f, call.lineno)), tree)
    text = lambda n: _segment(source, n, 80)  # noqa: E731
    consts: dict[tuple, ConstantDtype] = {}

    def elements(e: ast.AST, scope: ast.AST, depth: int) -> list[ast.AST]:
        """The values a container or variable holds: what it is assigned, appended, or added to."""
        if depth > 8:
            return []
        if isinstance(e, (ast.List, ast.Tuple, ast.Set)):
            return [x for el in e.elts for x in elements(el, scope, depth + 1)]
        if isinstance(e, ast.Dict):
            return [x for v in e.values for x in elements(v, scope, depth + 1)]
        if isinstance(e, ast.IfExp):
            return elements(e.body, scope, depth + 1) + elements(e.orelse, scope, depth + 1)
        if isinstance(e, ast.Subscript):
            return elements(e.value, scope, depth + 1)
        if isinstance(e, ast.Name):
            return [x for v in _values(scope, lambda t: isinstance(t, ast.Name) and t.id == e.id)
                    for x in elements(v, scope, depth + 1)]
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
            return [x for v in _values(tree, lambda t: isinstance(t, ast.Attribute) and t.attr == e.attr)
                    for x in elements(v, tree, depth + 1)]
        if isinstance(e, ast.Call) and _called(e) in funcs and funcs[_called(e)] is not home:
            fn = funcs[_called(e)]
            return [x for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None
                    for x in elements(r.value, fn, depth + 1)]
        return [e]

    def typed(e: ast.AST) -> None:
        """Note the dtype torch gives ``e`` (a leaf value) when it is a constant's; a ``dtype=`` given is none."""
        if isinstance(e, ast.Constant) and isinstance(e.value, (bool, int, float)):
            dt = "bool" if isinstance(e.value, bool) else "int64" if isinstance(e.value, int) else "float32"
            consts.setdefault((dt, e.lineno), ConstantDtype(dt, e.lineno, text(e)))
        elif not isinstance(e, ast.Call) or any(k.arg == "dtype" for k in e.keywords):
            return
        elif _called(e) in _FACTORIES and isinstance(e.func, ast.Attribute) and _dotted(e.func.value) == "torch":
            consts.setdefault(("float32", e.lineno), ConstantDtype("float32", e.lineno, text(e)))
        elif _called(e) in ("tensor", "as_tensor", "Tensor") and e.args:
            for x in elements(e.args[0], home, 0):
                typed(x)

    for leaf in elements(call.args[0], home, 0):
        typed(leaf)
    return sorted(consts.values(), key=lambda c: (c.line, c.dtype))


def _values(scope: ast.AST, target) -> list[ast.AST]:
    """Everything ``scope`` gives a target ``target(node)`` accepts: ``t = v``, ``t += v``, ``t[k] = v``, ``t[k] +=
    v``, ``t.append(v)``, ``t.extend(v)``."""
    found = []
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if target(t) or isinstance(t, ast.Subscript) and target(t.value):
                    found.append(n.value)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)) and n.value is not None and (
                target(n.target) or isinstance(n.target, ast.Subscript) and target(n.target.value)):
            found.append(n.value)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend") \
                and target(n.func.value) and n.args:
            found.append(n.args[0])
    return found


def own_call_at(source: str, line: int) -> str | None:
    """The name of the function of ``source``'s own that the module-level statement at ``line`` (1-based) calls
    (``main()`` under ``if __name__ == "__main__":``), or None."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    own = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return next((_called(c) for c in ast.walk(tree) if isinstance(c, ast.Call) and c.lineno == line
                 and _called(c) in own and isinstance(c.func, ast.Name)), None)
