"""Reading a run back: the user's source, with the modules of their own the script imports."""
from nbhelpers.diagnosis.culprit import RankView
from nbhelpers.runtime.runfolder import read_sources


def test_the_script_and_the_modules_of_its_own_it_imports(tmp_path):
    (tmp_path / "projkit").mkdir()
    (tmp_path / "projkit" / "__init__.py").write_text("from .dist import setup\n")
    (tmp_path / "projkit" / "dist.py").write_text("import torch.distributed as dist\nfrom ..other import x\n"
                                                  "def setup():\n    return dist.get_rank()\n")
    (tmp_path / "helpers.py").write_text("import json\n")
    (tmp_path / "unused.py").write_text("")
    script = tmp_path / "train.py"
    script.write_text("import os, torch\nimport helpers\nfrom projkit import setup\nfrom projkit.dist import setup\n")
    view = RankView(0, [], {"argv": [str(script)]}, "", "")
    found = read_sources([view])
    assert sorted(p.removeprefix(str(tmp_path) + "/") for p in found) == [
        "helpers.py", "projkit/__init__.py", "projkit/dist.py", "train.py"]
    assert found[str(tmp_path / "projkit" / "dist.py")].startswith("import torch.distributed")
