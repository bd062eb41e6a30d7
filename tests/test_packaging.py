"""Set-up promises: one dependency list in two files, the README's commands, CI calling make test."""
import re

import tomllib
from conftest import REPO


def pip_names(reqs):
    return {re.split(r"[=<>\[; ]", r.strip(), maxsplit=1)[0].lower() for r in reqs}


def test_environment_yml_lists_the_same_packages_as_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = set(project["dependencies"]) | set(extras["test"]) | set(extras["frameworks"])
    yml = (REPO / "environment.yml").read_text()
    listed = {ln.strip()[2:].strip() for ln in yml.split("- pip:")[1].splitlines() if ln.strip().startswith("- ")}
    assert pip_names(listed) == pip_names(wanted)
    assert "torch==2.13.0" in listed and "torch==2.13.0" in wanted  # the pin that keeps CUDA wheels out here


def test_readme_shows_the_commands_and_ci_runs_the_test_one():
    readme = (REPO / "README.md").read_text()
    for cmd in ("make setup", "make run", "make test", "make lab"):
        assert cmd in readme, cmd
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_notebooks_are_committed_without_outputs_and_with_parameters():
    import nbformat

    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert not any(c.outputs for c in code), f"{path.name} has outputs"
        assert any("parameters" in c.metadata.get("tags", []) for c in code), f"{path.name} has no parameters cell"
        assert not any(c.source.startswith("%%writefile") for c in code)


def test_every_data_file_the_package_reads_is_in_its_package_data():
    from fnmatch import fnmatch

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["nbhelpers"]
    data = REPO / "nbhelpers" / "data"
    files = [p.relative_to(REPO / "nbhelpers").as_posix() for p in data.rglob("*") if p.is_file()]
    assert files and [f for f in files if not any(fnmatch(f, pat) for pat in patterns)] == []
