import os
import sys
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"


def interruptible() -> None:
    """preexec_fn for a child that a test interrupts: Ctrl-C's default, even where this test session inherited
    SIGINT ignored (a shell starts background jobs so: `make test &`, nohup)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def workbook_processes(marker: str) -> list[psutil.Process]:
    """Live processes of workbook runs under ``marker`` (a test's private runs dir), ranks included."""
    from nbhelpers.runtime.procs import find_runs

    return find_runs(marker)


@pytest.fixture
def runs_dir(tmp_path, monkeypatch):
    """Each test gets its own runs dir; afterwards no process may still mention it."""
    d = tmp_path / "runs"
    monkeypatch.setenv("NBH_RUNS_DIR", str(d))
    yield d
    left = workbook_processes(str(d))
    for p in left:
        p.kill()
    assert not left, f"processes left behind: {[p.cmdline() for p in left if p.is_running()]}"


# Unit tests are pure: they start no process and run in seconds (`make test-unit`, `pytest -m unit`).  A test that
# starts processes (torchrun worlds, the CLI, py-spy, ip/tc) says so with @pytest.mark.integration (a whole module:
# `pytestmark = pytest.mark.integration`); every other test is marked unit here, and a unit test that starts a
# process fails saying so.  The notebooks are integration tests.
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker("integration")
        elif item.get_closest_marker("integration") is None:
            item.add_marker("unit")


@pytest.fixture(autouse=True)
def _a_unit_test_starts_no_process(request, monkeypatch):
    if request.node.get_closest_marker("unit") is not None:
        import subprocess

        def refuse(self, *args, **kwargs):
            raise AssertionError(f"{request.node.nodeid}: a unit test started a process; mark it "
                                 "@pytest.mark.integration (tests/conftest.py)")

        monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)


@pytest.fixture
def python():
    return sys.executable


def has_gpus(n: int = 1) -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available() and torch.cuda.device_count() >= n


@pytest.fixture
def no_firewall(tmp_path, monkeypatch):
    """PATH as on a fresh machine without nftables or iptables: every other command stays reachable."""
    shadow = tmp_path / "path-without-firewall"
    shadow.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        for exe in Path(d).glob("*") if Path(d).is_dir() else ():
            if not exe.name.startswith(("nft", "iptables", "ip6tables")) and not (shadow / exe.name).exists():
                (shadow / exe.name).symlink_to(exe)
    monkeypatch.setenv("PATH", str(shadow))
    yield shadow


def is_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


# ---- a report made once per session from purpose-built notebooks, with secrets planted in its environment
PLANTED = {"WB_API_TOKEN": "tok-planted-7c1f9e2a", "DB_PASSWORD": "pw-planted-b3d8a640", "MY_SECRET": "s3cr3t-planted-51ae"}
URL_PASSWORD = "urlpw-planted-0d4e"
CLI_SECRET = "cli-planted-e62b9f"  # in the env under a harmless name; reaches output only as --api-token's value
INCIDENT_SCRIPT = '''
import os, sys
rank = int(os.environ["RANK"])
print("rank", rank, "token", os.environ["WB_API_TOKEN"], "db", os.environ["DATABASE_URL"], "argv", " ".join(sys.argv), flush=True)
if rank == 1:
    raise RuntimeError("auth failed for " + os.environ["DB_PASSWORD"] + " " + os.environ["MY_SECRET"])
'''


def make_notebook(path, *sources, params="N = 1"):
    import nbformat

    cells = [nbformat.v4.new_code_cell(params)] + [nbformat.v4.new_code_cell(s) for s in sources]
    cells[0].metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.fixture(scope="session")
def planted_report(tmp_path_factory):
    """run_all over two small notebooks (charts, widgets, a real failing run, a cell that raises) with
    secrets planted in the environment; yields (report folder, the runs folder)."""
    from nbhelpers.report.build import run_all

    root = tmp_path_factory.mktemp("planted")
    script = root / "leaky.py"
    script.write_text(INCIDENT_SCRIPT)
    incident = make_notebook(
        root / "01_incident.ipynb",
        "import os, sys\nimport nbhelpers as nb\nimport plotly.graph_objects as go\nnb.setup_notebook(quiet=True)",
        "print('token', os.environ['WB_API_TOKEN'], 'db', os.environ['DATABASE_URL'])\n"
        "print('pw', os.environ['DB_PASSWORD'], file=sys.stderr)",
        "from IPython.display import HTML\nHTML('<b>planted</b> ' + os.environ['DB_PASSWORD'])",
        "go.Figure(go.Bar(x=[1, 2], y=[3, 1]), layout_title_text='fig one ' + os.environ['WB_API_TOKEN'])",
        "go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 4, 9]), layout_title_text='fig two')",
        "nb.paste_box('pasted ' + os.environ['MY_SECRET'])",
        f"res = nb.supervise({str(script)!r}, ['--api-token', os.environ['LEAK_ARG']], nproc=2, timeout=60)\n"
        "nb.record(res)\nres",
        "nb.record('planted_value', 42)",
        params="N = 1")
    failing = make_notebook(
        root / "02_fails.ipynb",
        "import os\nraise RuntimeError('torch.distributed.DistStoreError: Timed out after 11 seconds waiting for clients. '\n"
        "                   '1/2 clients joined. token=' + os.environ['WB_API_TOKEN'])",
        "print('never runs')")
    runs = root / "runs"
    with pytest.MonkeyPatch.context() as mp:
        for k, v in PLANTED.items():
            mp.setenv(k, v)
        mp.setenv("DATABASE_URL", f"postgres://alice:{URL_PASSWORD}@db.invalid:5432/x")
        mp.setenv("LEAK_ARG", CLI_SECRET)
        mp.setenv("NBH_RUNS_DIR", str(runs))
        out = run_all(root / "reports", [incident, failing], parameters={"N": 3})
    left = workbook_processes(str(runs))
    assert not left, f"processes left behind: {[p.cmdline() for p in left]}"
    yield out, runs
