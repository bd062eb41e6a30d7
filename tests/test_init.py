"""The package's lazy exports: nothing heavy at import, and exported functions that share their module's name."""
import subprocess
import sys


def run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def test_import_starts_nothing_heavy():
    assert run("import sys, nbhelpers; print('torch' in sys.modules, 'plotly' in sys.modules)") == "False False"


def test_functions_named_like_their_module_survive_the_module_import():
    code = ("import importlib, nbhelpers as nb\n"
            "names = ['classify', 'supervise', 'sweep', 'timeouts']\n"
            "for n in names: importlib.import_module('nbhelpers.' + n)\n"
            "from nbhelpers.classify import CHUNK\n"
            "print(all(callable(getattr(nb, n)) and getattr(nb, n).__name__ == n for n in names))")
    assert run(code) == "True"
