"""The package's layers import only downwards: diagnosis <- runtime <- scenarios <- views <- report.

Every import of an nbhelpers module (top-level or inside a function) is read from the source, so a
lazy import that runs backwards is caught too.
"""
import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "nbhelpers"
ORDER = ["diagnosis", "runtime", "scenarios", "views", "report"]
# below every layer: the exception root, and the utilities users import into their own training code
SHARED = {"errors", "checkpoint", "chunked"}
ALLOWED = {layer: set(ORDER[:i + 1]) | SHARED for i, layer in enumerate(ORDER)}
ALLOWED["workers"] = {"workers", "runtime", "diagnosis"} | SHARED   # rank programs: no scenarios, views, report
ALLOWED.update({name: {"errors"} for name in ("errors", "checkpoint", "chunked")})


def layer_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def imported(path: Path) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nbhelpers."):
            found.append((node.lineno, node.module.split(".")[1]))
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: relative import; import nbhelpers.<layer>... instead")
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[1]) for a in node.names if a.name.startswith("nbhelpers.")]
    return found


MODULES = sorted(p for p in PKG.rglob("*.py") if layer_of(p) not in ("__init__", "__main__"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PKG)))
def test_imports_run_downwards(path):
    layer = layer_of(path)
    assert layer in ALLOWED, f"{path}: not in any layer; put it in one of {ORDER} (or name it in SHARED)"
    wrong = [f"line {n}: imports nbhelpers.{target}" for n, target in imported(path) if target not in ALLOWED[layer]]
    assert not wrong, f"{path.relative_to(PKG)} ({layer}) may import only {sorted(ALLOWED[layer])}: {wrong}"


def test_the_check_sees_a_backward_import(tmp_path):
    bad = tmp_path / "x.py"
    bad.write_text("def f():\n    from nbhelpers.views.display import timeline\n")
    assert imported(bad) == [(2, "views")] and "views" not in ALLOWED["runtime"]


def module_of(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def imports_by_module() -> dict[str, set[str]]:
    graph = {}
    for path in PKG.rglob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("nbhelpers."):
                deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("nbhelpers.")}
        graph[module_of(path)] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle, as the modules along it (one per strongly connected group)."""
    found, state = [], {}

    def visit(m, path):
        state[m] = "open"
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                found.append(path[path.index(d):] + [d])
            elif d not in state:
                visit(d, path + [d])
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return found


def test_no_module_imports_itself_back_through_others():
    # a cycle inside a layer (launcher -> hangwatch -> launcher) hides in lazy imports and makes either module
    # impossible to read alone
    assert cycles(imports_by_module()) == []


def test_the_cycle_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


# diagnosis/ is pure: functions over text and records, no rendering, no processes.  What still reads the machine or
# runs a library's own analysis is listed here with why, and nothing else may join the list unnoticed.
IMPURE = ("pandas", "plotly", "subprocess", "psutil", "torch", "sklearn", "ipywidgets")
STILL_IMPURE = {
    ("flightrec", "torch"): "torch's own Flight Recorder matcher (components.builder), pure functions over records",
}


def third_party(path: Path) -> set[str]:
    tops = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            tops.add(node.module.split(".")[0])
    return tops & set(IMPURE)


@pytest.mark.parametrize("path", sorted((PKG / "diagnosis").glob("*.py")), ids=lambda p: p.name)
def test_diagnosis_renders_nothing_and_starts_nothing(path):
    found = {(path.stem, lib) for lib in third_party(path)}
    assert found <= set(STILL_IMPURE), (f"{path.name} imports {sorted(lib for _, lib in found - set(STILL_IMPURE))}: "
                                        "tables and charts belong in views/, processes and the machine in runtime/")


def test_the_list_of_what_is_still_impure_is_not_stale():
    still = {(p.stem, lib) for p in (PKG / "diagnosis").glob("*.py") for lib in third_party(p)}
    assert set(STILL_IMPURE) <= still, set(STILL_IMPURE) - still
