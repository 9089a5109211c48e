"""Every output format, on the same findings: validated, parsed back, escaped correctly."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from gpulint.core.findings import Finding, Location
from gpulint.core.settings import Settings
from gpulint.engine.linter import lint_text
from gpulint.output import FORMATS, renderer
from gpulint.output.display import RenderContext
from gpulint.output.full import render_full
from gpulint.output.github import (
    annotation,
    escape_data,
    escape_property,
    render_github,
)
from gpulint.output.json_format import render_json, render_json_lines
from gpulint.output.junit import render_junit
from gpulint.output.sarif import sarif_log
from gpulint.output.statistics import statistics
from gpulint.rules import all_rules

SCHEMA = Path(__file__).resolve().parent.parent / "data" / "sarif-2.1.0-subset.schema.json"
SOURCE = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST
loader = DataLoader(MNIST(),
                    batch_size=8)
opt = torch.optim.Adam(model.parameters())
for images, labels in loader:
    images = images.to("cuda")
"""


@pytest.fixture
def findings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Finding]:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(SOURCE)
    found = lint_text(Path("train.py"), SOURCE, Settings()).findings
    assert [f.code for f in found] == ["GPU101", "GPU102", "GPU201"]
    return found


def _empty_report_is_valid(name: str, text: str) -> None:
    """No findings is still a document the format's readers accept, and it reports nothing."""
    if name in ("concise", "full", "github", "json-lines"):
        assert text == ""  # one line (or block) a finding: nothing at all
    elif name in ("json", "gitlab"):
        assert json.loads(text) == []
    elif name == "sarif":
        log = json.loads(text)
        assert log["version"] == "2.1.0" and [run["results"] for run in log["runs"]] == [[]]
    elif name == "junit":
        suites = ET.fromstring(text)
        assert suites.get("failures") == "0" and list(suites.iter("failure")) == []
    else:
        raise AssertionError(f"no check for the format {name}: add one")


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_renders_nothing_and_something(name: str, findings: list[Finding]) -> None:
    _empty_report_is_valid(name, renderer(name)([], RenderContext()))
    full = renderer(name)(findings, RenderContext())
    assert "GPU101" in full and "GPU201" in full


# json ----------------------------------------------------------------------------------------

def test_json_round_trip(findings: list[Finding], tmp_path: Path) -> None:
    data = json.loads(render_json(findings))
    assert len(data) == len(findings)
    for item, finding in zip(data, findings):
        assert item["code"] == finding.code
        assert item["message"] == finding.message
        assert item["filename"] == str(tmp_path / "train.py")
        assert (item["location"]["row"], item["location"]["column"]) == (finding.location.row, finding.location.column)
        assert (item["end_location"]["row"], item["end_location"]["column"]) == (
            finding.end_location.row, finding.end_location.column)
        assert item["url"] is None  # no docs site named: no link (tests/test_docs_url.py)
        if finding.fix is None:
            assert item["fix"] is None
        else:
            assert item["fix"]["applicability"] == finding.fix.applicability.value
            assert [e["content"] for e in item["fix"]["edits"]] == [e.content for e in finding.fix.edits]
    lines = [json.loads(line) for line in render_json_lines(findings).splitlines()]
    assert lines == data


def test_finding_dict_round_trip(findings: list[Finding]) -> None:
    for finding in findings:
        again = Finding.from_dict(json.loads(json.dumps(finding.to_dict())))
        assert again == finding


# github --------------------------------------------------------------------------------------

def _parse_annotation(line: str) -> tuple[dict[str, str], str]:
    """Read a workflow command back the way the runner does."""
    match = re.fullmatch(r"::error (?P<props>[^:]*)::(?P<data>.*)", line)
    assert match, line
    def unescape(value: str) -> str:
        return (value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":").replace("%2C", ",")
                .replace("%25", "%"))
    props = {}
    for item in match.group("props").split(","):
        key, _, value = item.partition("=")
        props[key] = unescape(value)
    return props, unescape(match.group("data"))


def test_github_escaping_rules() -> None:
    assert escape_data("50% of a,b: c\nd\re") == "50%25 of a,b: c%0Ad%0De"
    assert escape_property("dir,x/a:b%c\n.py") == "dir%2Cx/a%3Ab%25c%0A.py"


def test_github_annotation_survives_hostile_path_and_message() -> None:
    path = "we,ird:dir/100%\nfile.py"
    message = "two lines\nwith 100% and a::b, c"
    finding = Finding(path=path, code="GPU101", name="x", message=message,
                      location=Location(3, 5), end_location=Location(4, 9))
    line = annotation(finding)
    assert "\n" not in line
    props, data = _parse_annotation(line)
    assert props == {"title": "gpulint (GPU101)", "file": path, "line": "3", "col": "5", "endLine": "4",
                     "endColumn": "9"}
    assert data == f"GPU101 {message}"


def test_github_format_one_line_per_finding(findings: list[Finding]) -> None:
    lines = render_github(findings).splitlines()
    assert len(lines) == 3
    props, _ = _parse_annotation(lines[2])
    assert props["file"] == "train.py" and props["line"] == "6" and props["col"] == "7"


# sarif ---------------------------------------------------------------------------------------

def test_sarif_validates_against_schema(findings: list[Finding]) -> None:
    schema = json.loads(SCHEMA.read_text())
    log = json.loads(renderer("sarif")(findings, RenderContext()))
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(log), key=str)
    assert not errors, errors[0]
    empty = sarif_log([])
    assert not list(validator.iter_errors(empty))
    linked = json.loads(renderer("sarif")(findings, RenderContext(docs_site="https://docs.example.org")))
    assert not list(validator.iter_errors(linked))  # helpUri and informationUri, when a site is named


def test_schema_rejects_what_it_should() -> None:
    """The bundled schema is strict enough to catch mistakes (guards the test above)."""
    schema = json.loads(SCHEMA.read_text())
    log = sarif_log([])
    bad = json.loads(json.dumps(log))
    bad["version"] = "2.0.0"
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))
    bad = json.loads(json.dumps(log))
    bad["runs"][0]["tool"]["driver"]["rules"][0]["helpURI"] = "x"  # misspelled property
    assert list(jsonschema.Draft7Validator(schema).iter_errors(bad))


def test_sarif_rules_results_and_fixes(findings: list[Finding]) -> None:
    log = sarif_log(findings)
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert {r["id"] for r in rules} == {r.code for r in all_rules()}
    assert "informationUri" not in run["tool"]["driver"]  # no docs site named: no links
    for rule in rules:
        assert "helpUri" not in rule
        assert rule["help"]["markdown"].startswith("# ")
    assert run["columnKind"] == "unicodeCodePoints"
    results = run["results"]
    assert [r["ruleId"] for r in results] == ["GPU101", "GPU102", "GPU201"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] == "train.py"
    region = results[2]["locations"][0]["physicalLocation"]["region"]
    assert region == {"startLine": 6, "startColumn": 7, "endLine": 6, "endColumn": 43}
    replacement = results[2]["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert replacement["insertedContent"]["text"] == ", fused=True"


# junit ---------------------------------------------------------------------------------------

def test_junit_parses_and_counts(findings: list[Finding]) -> None:
    root = ET.fromstring(render_junit(findings))
    assert root.tag == "testsuites" and root.get("failures") == "3"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["train.py"]
    cases = suites[0].findall("testcase")
    assert len(cases) == 3 and all(c.find("failure") is not None for c in cases)
    assert cases[2].find("failure").get("type") == "GPU201"


def test_junit_without_findings_is_one_passing_case() -> None:
    root = ET.fromstring(render_junit([]))
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 1 and cases[0].find("failure") is None


def test_junit_escapes_markup_and_drops_control_characters() -> None:
    finding = Finding(path="a<&>.py", code="GPU101", name="x", message='bad "<tag>" & \x1b[31m',
                      location=Location(1, 1), end_location=Location(1, 2))
    root = ET.fromstring(render_junit([finding]))
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and '"<tag>" &' in failure.get("message", "")
    assert root.find("testsuite").get("name") == "a<&>.py"


# full ----------------------------------------------------------------------------------------

def test_full_shows_source_caret_and_fix_diff(findings: list[Finding]) -> None:
    text = render_full(findings)
    block = text.split("\n\n")[2]  # the GPU201 finding
    lines = block.splitlines()
    assert lines[0].startswith("train.py:6:7: GPU201 [*]")
    source_line = next(line for line in lines if "| opt = torch.optim.Adam" in line)
    caret_line = lines[lines.index(source_line) + 1]
    assert caret_line.index("^") == source_line.index("torch.optim.Adam")
    assert caret_line.rstrip().endswith("^ GPU201")
    assert "Safe fix: Add `fused=True`" in block
    assert any(line.strip() == "+opt = torch.optim.Adam(model.parameters(), fused=True)" for line in lines)
    assert any(line.strip() == "-opt = torch.optim.Adam(model.parameters())" for line in lines)
    assert "Unsafe fix (needs --unsafe-fixes)" in text.split("\n\n")[1]


def test_full_uses_given_source_for_stdin() -> None:
    text = "import torch\nopt = torch.optim.Adam(model.cuda().parameters())\n"
    found = lint_text(Path("-"), text, Settings()).findings
    rendered = render_full(found, RenderContext(sources={"-": text}))
    assert "2 | opt = torch.optim.Adam(model.cuda().parameters())" in rendered


# statistics ----------------------------------------------------------------------------------

def test_statistics_counts(findings: list[Finding]) -> None:
    rows = statistics(findings + findings[:1])
    assert rows[0] == {"code": "GPU101", "name": "dataloader-without-pin-memory", "count": 2, "fixable": True,
                       "fixable_count": 2}
    assert {r["code"]: r["count"] for r in rows} == {"GPU101": 2, "GPU102": 1, "GPU201": 1}
