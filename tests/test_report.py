"""run_all on small real notebooks: executed copies, HTML, summary, and a report even when one fails."""
import json

import nbformat

from nbhelpers.report import declared_parameters, run_all


def notebook(path, *sources, params="N = 1"):
    cells = [nbformat.v4.new_code_cell(params)] + [nbformat.v4.new_code_cell(s) for s in sources]
    cells[0].metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def test_run_all_writes_executed_notebooks_html_and_summary(tmp_path, monkeypatch):
    monkeypatch.setenv("SOME_API_TOKEN", "tok-planted-9f8e7d")
    good = notebook(tmp_path / "01_good.ipynb", "import os\nprint('N is', N, os.environ['SOME_API_TOKEN'])",
                    params="N = 1\nSIZE_MB = 1.0")
    bad = notebook(tmp_path / "02_bad.ipynb", "raise ValueError('planted failure')")
    assert declared_parameters(good) == {"N", "SIZE_MB"}
    out = run_all(tmp_path / "reports", [good, bad], parameters={"N": 7})
    summary = json.loads((out / "summary.json").read_text())
    status = {n["notebook"]: n["status"] for n in summary["notebooks"]}
    assert status == {"01_good.ipynb": "ok", "02_bad.ipynb": "failed"}
    assert "planted failure" in summary["notebooks"][1]["error"]
    executed = nbformat.read(out / "01_good.ipynb", as_version=4)
    assert "N is 7" in executed.cells[-1].outputs[0]["text"]
    html = (out / "01_good.html").read_text()
    assert "N is 7" in html and "tok-planted-9f8e7d" not in html
    assert (out / "02_bad.html").exists()
    index = (out / "index.html").read_text()
    assert "02_bad.ipynb" in index and "failed" in index
