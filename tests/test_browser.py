"""Real-browser tests: headless Debian Chromium driven by Playwright (no browser download).

1. JupyterLab on a free loopback port opens notebook 01 (quick parameters), runs every cell; the widget
   controls and a plotly chart are in the page; the paste box answers a click; Save + *Export report*.
2. The incident reports (run_all's and the exported one) open from disk with the network blocked,
   and every chart is drawn (plotly's ``.main-svg``).

Screenshots go to ``test-artifacts/`` (gitignored).  Without Chromium or the ``playwright`` package the
tests skip and say why; ``.ci/run`` installs Debian's chromium so CI runs them.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from conftest import REPO, workbook_processes

ARTIFACTS = REPO / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
QUICK = {"NPROC": 2, "TIMEOUT": 5.0, "SIZE_MB": 4.0, "FAULT": "exit", "FAULT_RANK": 1, "GALLERY": ("exit",),
         "SCALE": (2,)}
LAB_SETTINGS = {  # no news popup, every cell in the DOM, widget state saved with the notebook
    "@jupyterlab/apputils-extension/notification": {"fetchNews": "false", "checkForUpdates": False},
    "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
    "@jupyter-widgets/jupyterlab-manager/plugin": {"saveState": True},
}


def skip_reason() -> str | None:
    if not CHROMIUM:
        return "no Chromium on PATH: install Debian's `chromium` (apt-get install -y chromium; .ci/run does this)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the `playwright` Python package is missing: pip install -e '.[test]'"
    return None


@pytest.fixture(scope="module")
def browser():
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def open_offline(browser, report: Path, shot: str) -> dict:
    """Open a report file with every non-file request aborted; wait for the charts; screenshot it."""
    ctx = browser.new_context(offline=True, viewport={"width": 1280, "height": 900})
    requested: list[str] = []

    def route(r):
        if r.request.url.startswith("file:"):
            return r.continue_()
        requested.append(r.request.url)
        return r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    expected = page.locator(".nbh-plotly").count()
    page.wait_for_function(f"document.querySelectorAll('.nbh-plotly .main-svg').length >= {expected}",
                           timeout=30_000)
    drawn = page.evaluate("[...document.querySelectorAll('.nbh-plotly')].filter(d => d.querySelector('.main-svg')"
                          " && d.querySelector('.plot-container')).length")
    page.screenshot(path=str(ARTIFACTS / f"{shot}-top.png"))
    page.locator(".nbh-plotly").first.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / f"{shot}-chart.png"))
    result = {"expected": expected, "drawn": drawn, "requested": requested, "errors": errors,
              "verdict": page.locator("#nbh-verdict").inner_text()}
    ctx.close()
    return result


def test_run_all_report_draws_every_chart_offline(browser, planted_report):
    out, _ = planted_report
    got = open_offline(browser, out / "report.html", "run-all-report")
    assert got["expected"] == 2 and got["drawn"] == 2, got
    assert not got["requested"] and not got["errors"], got
    assert "1 of 2 notebook(s) failed" in got["verdict"]


def quick_copy(dst: Path) -> Path:
    """Notebook 01 with small parameters appended to its parameters cell (as papermill would inject them)."""
    nb = nbformat.read(REPO / "notebooks" / "01_diagnose.ipynb", as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += "\n# quick values for the browser test\n" + "\n".join(f"{k} = {v!r}" for k, v in QUICK.items())
    nbformat.write(nb, dst / "01_diagnose.ipynb")
    return dst / "01_diagnose.ipynb"


@pytest.fixture
def lab(tmp_path):
    """JupyterLab on 127.0.0.1:<free port> with an empty token, serving a quick copy of notebook 01."""
    from nbhelpers.runtime.ports import free_port

    if skip_reason():
        pytest.skip(skip_reason())
    root = tmp_path / "root"
    root.mkdir()
    quick_copy(root)
    settings = tmp_path / "settings"
    for plugin, values in LAB_SETTINGS.items():
        f = settings / f"{plugin}.jupyterlab-settings"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(values))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO), "JUPYTERLAB_SETTINGS_DIR": str(settings),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"), "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "NBH_RUNS_DIR": str(tmp_path / "runs"), "NBH_REPORTS_DIR": str(tmp_path / "reports")}
    log = (tmp_path / "lab.log").open("wb")
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--IdentityProvider.token=", f"--ServerApp.root_dir={root}"] + (["--allow-root"] if os.geteuid() == 0 else [])
    proc = subprocess.Popen(cmd,
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not answer on {url}: {(tmp_path / 'lab.log').read_text()[-2000:]}")
            time.sleep(0.3)
    try:
        yield url, root, tmp_path
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()
        left = workbook_processes(str(tmp_path / "runs"))
        for p in left:
            p.kill()
        assert not left, f"processes left behind: {[p.cmdline() for p in left if p.is_running()]}"


def wait_kernel_ready(page, timeout: float = 60.0) -> None:
    """Until the notebook's kernel is started and idle; accepts Lab's kernel dialog if it asks."""
    page.wait_for_selector(".jp-Notebook .jp-CodeCell")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        accept = page.locator(".jp-Dialog .jp-mod-accept")
        if accept.count() and accept.first.is_visible():
            accept.first.click()
        kernel = page.locator(".jp-NotebookPanel-toolbar .jp-KernelName, .jp-Toolbar-kernelName").first
        name = kernel.inner_text() if kernel.count() else ""
        if name and "No Kernel" not in name and page.locator(
                ".jp-Notebook-ExecutionIndicator[data-status='idle']").count():
            return
        time.sleep(0.5)
    raise AssertionError("the notebook's kernel did not become idle")


ALL_PROMPTS_NUMBERED = """() => {
  const ps = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
  return ps.length > 0 && ps.every(p => /\\[\\d+\\]/.test(p.textContent));
}"""


@pytest.mark.integration
def test_lab_runs_notebook_01_with_widgets_and_chart_then_exports_a_report(browser, lab):
    url, root, tmp = lab
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    page.set_default_timeout(60_000)
    (ARTIFACTS / "lab-01-failed.png").unlink(missing_ok=True)
    try:
        page.goto(f"{url}/lab/tree/01_diagnose.ipynb?reset")
        wait_kernel_ready(page)
        page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()
        page.wait_for_function(ALL_PROMPTS_NUMBERED, timeout=150_000)
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']")
        page.screenshot(path=str(ARTIFACTS / "lab-01-top.png"))

        chart = page.locator(".jp-OutputArea-output.js-plotly-plot").first
        chart.wait_for(state="attached")
        chart.scroll_into_view_if_needed()
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "lab-01-chart.png"))
        box = chart.locator(".main-svg").first.bounding_box()
        assert box and box["width"] > 200 and box["height"] > 100, box
        assert page.locator(".jp-OutputArea-output.js-plotly-plot").count() >= 2

        area = page.locator(".jupyter-widgets textarea").first
        area.fill("torch.distributed.DistStoreError: Timed out after 11 seconds waiting for clients. 1/2 clients joined.")
        page.locator(".jupyter-widgets button", has_text="Diagnose").click()
        page.locator(".widget-html", has_text="rendezvous_timeout").first.wait_for()
        area.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "lab-01-paste-box.png"))

        page.locator(".jp-Notebook").first.click(position={"x": 5, "y": 5})
        page.keyboard.press("Control+s")
        page.wait_for_function("() => !document.querySelector('.jp-mod-dirty')", timeout=20_000)
        export = page.locator(".jupyter-widgets button", has_text="Export report")
        export.scroll_into_view_if_needed()
        export.click()
        written = page.locator(".widget-html", has_text="report written:")
        written.wait_for(timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "lab-01-exported.png"))
        report = Path(re.search(r"report written: (\S+report\.html)", written.inner_text())[1])
    except Exception:
        page.screenshot(path=str(ARTIFACTS / "lab-01-failed.png"))
        raise
    finally:
        ctx.close()
    assert report.is_relative_to(tmp / "reports") and report.is_file()
    saved = nbformat.read(root / "01_diagnose.ipynb", as_version=4)
    assert "widgets" in saved.metadata, "Lab did not save widget state"
    # a cell that raised (not a log the notebook shows, which may hold a traceback of its own)
    raised = [f"{o.ename}: {o.evalue}" for c in saved.cells if c.cell_type == "code"
              for o in c.get("outputs", []) if o.output_type == "error"]
    assert not raised, raised
    got = open_offline(browser, report, "exported-report")
    assert got["expected"] >= 2 and got["drawn"] == got["expected"], got
    assert not got["requested"] and not got["errors"], got
    summary = json.loads((report.parent / "summary.json").read_text())
    outcomes = [r["outcome"] for r in summary["notebooks"][0]["records"]]
    assert outcomes.count("reproduced") >= 2 and "unexpected" not in outcomes, outcomes
    text = report.read_text()
    assert "widget state not saved" not in text and "rendezvous_timeout" in text


def test_without_chromium_the_browser_tests_skip_and_say_why(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", None)
    reason = skip_reason()
    assert "Chromium" in reason and "apt-get install -y chromium" in reason
