"""The package's lazy exports: nothing heavy at import, and exported functions that share their module's name."""
import pytest
import subprocess
import sys


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.integration
def test_import_starts_nothing_heavy():
    assert run("import sys, nbhelpers; print('torch' in sys.modules, 'plotly' in sys.modules)") == "False False"


@pytest.mark.integration
def test_functions_named_like_their_module_survive_the_module_import():
    code = ("import importlib, nbhelpers as nb\n"
            "names = {'classify': 'diagnosis', 'supervise': 'scenarios', 'sweep': 'scenarios', 'timeouts': 'scenarios'}\n"
            "for n, layer in names.items(): importlib.import_module(f'nbhelpers.{layer}.{n}')\n"
            "print(all(callable(getattr(nb, n)) and getattr(nb, n).__name__ == n for n in names))")
    assert run(code) == "True"


@pytest.mark.integration
def test_every_public_name_is_listed_and_loads():
    code = ("import nbhelpers as nb\n"
            "missing = [n for n in nb.__all__ if getattr(nb, n, None) is None]\n"
            "print(len(nb.__all__) > 90, sorted(nb.__all__) == nb.__all__, missing, set(nb.__all__) <= set(dir(nb)))")
    assert run(code) == "True True [] True"
