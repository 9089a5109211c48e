"""`--output-format gitlab`: GitLab's Code Quality report, checked against the fields GitLab documents."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from gpulint.cli import main
from tests.notebook.nbfiles import notebook

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "data" / "gitlab-code-quality.schema.json").read_text())
GPU = 'import torch\ntorch.device("cuda")\n'
TWICE = GPU + "a = torch.optim.Adam(p)\nb = a\na = torch.optim.Adam(p)\n"  # two identical lines, both reported
CORRECTNESS = GPU + """\
from torch.utils.checkpoint import checkpoint
y = checkpoint(block, x)  # noqa: GPU101
"""


def report(folder: Path, *paths: str) -> list[dict]:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--output-format", "gitlab", *paths],
                                catch_exceptions=False)
    assert result.exit_code in (0, 1), result.stderr
    data = json.loads(result.stdout)
    jsonschema.validate(data, SCHEMA)
    return data


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    return tmp_path


def test_the_report_has_gitlabs_fields_for_files_and_notebooks(project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text(TWICE)
    (project / "nb.ipynb").write_text(notebook([GPU, "opt = torch.optim.AdamW(p)\n"]))
    issues = report(project, ".")
    assert [(i["location"]["path"], i["location"]["lines"]["begin"], i["check_name"]) for i in issues] == [
        ("nb.ipynb", 21, "GPU201"), ("src/train.py", 3, "GPU201"), ("src/train.py", 5, "GPU201")]
    notebook_issue = issues[0]
    assert notebook_issue["description"].startswith("GPU201 cell 2:1:7: ")
    assert json.loads((project / "nb.ipynb").read_text())["cells"][1]["source"] == ["opt = torch.optim.AdamW(p)\n"]
    assert (project / "nb.ipynb").read_text().splitlines()[20].strip() == '"opt = torch.optim.AdamW(p)\\n"'


def test_fingerprints_are_unique_and_survive_lines_added_above(project: Path) -> None:
    (project / "train.py").write_text(TWICE)
    before = [i["fingerprint"] for i in report(project, ".")]
    assert len(set(before)) == 2  # the same finding twice in a file: two issues
    (project / "train.py").write_text("# a comment moves every line down\n" + TWICE)
    after = report(project, ".")
    assert [i["fingerprint"] for i in after] == before and [i["location"]["lines"]["begin"] for i in after] == [4, 6]
    (project / "train.py").write_text(TWICE.replace("a = torch.optim.Adam(p)\nb", "c = torch.optim.Adam(p)\nb"))
    assert report(project, ".")[0]["fingerprint"] not in before  # another statement, another finding


def test_severity_follows_what_the_finding_costs(project: Path) -> None:
    (project / "train.py").write_text(CORRECTNESS + "opt = torch.optim.Adam(p)\n")
    (project / "broken.py").write_text("def f(:\n    torch.manual_seed(0)\n")
    severities = {i["check_name"]: i["severity"] for i in report(project, ".")}
    assert severities == {"GPU000": "major", "GPU302": "major", "GPU900": "info", "GPU201": "minor"}


def test_paths_are_relative_to_the_gitlab_project(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / "pkg").mkdir()
    (project / "pkg" / "train.py").write_text(TWICE)
    monkeypatch.setenv("CI_PROJECT_DIR", str(project))
    monkeypatch.chdir(project / "pkg")
    assert {i["location"]["path"] for i in report(project, ".")} == {"pkg/train.py"}
