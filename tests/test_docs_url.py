"""Rule links point to a docs site only when one is named (`docs-url`, or the package metadata's
`Documentation` URL); otherwise no URL is printed anywhere: gpulint has no site of its own.

The LSP side (diagnostics' codeDescription, hover) is in tests/server/test_lsp.py.
"""

from __future__ import annotations

import email.message
import json
import re
import sys
from pathlib import Path

import pytest

from gpulint.core import docs_url
from gpulint.core.docs_url import docs_site, rule_url
from tests.conftest import Gpulint

TRAIN = """\
import torch
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda")
loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
for (x,) in loader:
    x = x.to(device, non_blocking=True)
"""
SITE = "https://docs.example.org/gpulint"
_URL = re.compile(r"https?://")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text(TRAIN)
    return tmp_path


@pytest.fixture(autouse=True)
def no_package_site(monkeypatch: pytest.MonkeyPatch) -> None:
    """As installed from this repository: pyproject.toml names no Documentation URL."""
    monkeypatch.setattr(docs_url, "package_docs_url", lambda: None)


def _outputs(gl: Gpulint) -> dict[str, str]:
    return {fmt: gl.check("--output-format", fmt, "train.py").output
            for fmt in ("concise", "full", "json", "json-lines", "sarif", "github", "junit")}


def test_no_site_means_no_url_anywhere(gl: Gpulint, project: Path) -> None:
    outputs = _outputs(gl)
    for fmt, text in outputs.items():
        if fmt == "sarif":  # its $schema is the one URL it must carry
            text = text.replace('"https://json.schemastore.org/sarif-2.1.0.json"', "")
        assert not _URL.search(text), (fmt, text)
    assert [f["url"] for f in json.loads(outputs["json"])] == [None]  # as ruff writes a rule without docs
    run = json.loads(outputs["sarif"])["runs"][0]
    assert "informationUri" not in run["tool"]["driver"]
    assert not any("helpUri" in rule for rule in run["tool"]["driver"]["rules"])
    shown = gl("rule", "GPU101").output
    assert shown.startswith("# dataloader-without-pin-memory (GPU101)") and not _URL.search(shown)
    assert 'docs-url = ""' in gl("show-config", "train.py").output


@pytest.mark.parametrize("written", [SITE, SITE + "/"])
def test_docs_url_links_every_output_to_the_rule_pages(gl: Gpulint, project: Path, written: str) -> None:
    (project / "pyproject.toml").write_text(f'[tool.gpulint]\ndocs-url = "{written}"\n')
    page = f"{SITE}/rules/GPU101/"
    outputs = _outputs(gl)
    assert [f["url"] for f in json.loads(outputs["json"])] == [page]
    assert json.loads(outputs["json-lines"])["url"] == page
    run = json.loads(outputs["sarif"])["runs"][0]
    assert run["tool"]["driver"]["informationUri"] == SITE
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["GPU101"]["helpUri"] == page and rules["GPU302"]["helpUri"] == f"{SITE}/rules/GPU302/"
    assert gl("rule", "GPU101").output.rstrip().endswith(f"Docs: {page}")
    assert f'docs-url = "{SITE}"' in gl("show-config", "train.py").output
    for fmt in ("concise", "full", "github", "junit"):  # the human formats never carried links
        assert page not in outputs[fmt]


def test_docs_url_reaches_stdin_too(gl: Gpulint, project: Path) -> None:
    (project / "pyproject.toml").write_text(f'[tool.gpulint]\ndocs-url = "{SITE}"\n')
    result = gl("check", "--output-format", "json", "--stdin-filename", "train.py", "-", input=TRAIN)
    assert [f["url"] for f in json.loads(result.output)] == [f"{SITE}/rules/GPU101/"]


@pytest.mark.parametrize("value", ['"gpulint.dev"', '"ftp://example.org"', "true", '""'])
def test_a_docs_url_that_is_not_a_web_address_is_a_configuration_error(gl: Gpulint, project: Path,
                                                                        value: str) -> None:
    (project / "pyproject.toml").write_text(f"[tool.gpulint]\ndocs-url = {value}\n")
    result = gl.check("train.py")
    assert result.exit_code == 2 and "docs-url" in result.output


def _install_metadata(folder: Path, *urls: str) -> Path:
    """A `gpulint-*.dist-info` as pip writes it, with these Project-URL entries."""
    info = folder / "gpulint-9.9.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", "Name: gpulint", "Version: 9.9", *(f"Project-URL: {u}" for u in urls)]
    (info / "METADATA").write_text("\n".join(lines) + "\n\nProject-URL: Docs, https://body.example.org\n")
    return folder


def test_the_package_metadata_names_the_site_when_the_setting_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # the real lookup, on metadata made up here
    import importlib.metadata

    with_docs = _install_metadata(tmp_path / "a", "Source, https://example.org/src", f"Documentation, {SITE}/")
    without = _install_metadata(tmp_path / "b", "Source, https://example.org/src")
    docs_url.package_docs_url.cache_clear()
    try:
        monkeypatch.setattr(sys, "path", [str(tmp_path / "missing"), str(with_docs), *sys.path])
        assert docs_site(None) == SITE
        assert docs_site("https://other.example.org/") == "https://other.example.org"  # the setting wins
        # the direct reader finds what importlib.metadata finds (the body's line is not a header)
        found = importlib.metadata.distribution("gpulint").metadata.get_all("Project-URL")
        assert docs_url._project_urls() == found == ["Source, https://example.org/src", f"Documentation, {SITE}/"]
        monkeypatch.setattr(sys, "path", [str(without), *sys.path])
        docs_url.package_docs_url.cache_clear()
        assert docs_site(None) is None
    finally:
        docs_url.package_docs_url.cache_clear()


def test_without_a_dist_info_folder_importlib_metadata_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """An egg-info or zipped install: the direct reader finds nothing, importlib.metadata decides."""
    monkeypatch.undo()
    import importlib.metadata

    message = email.message.Message()
    message["Project-URL"] = f"Documentation, {SITE}"
    monkeypatch.setattr(sys, "path", [])
    monkeypatch.setattr(importlib.metadata, "metadata", lambda name: message)
    docs_url.package_docs_url.cache_clear()
    try:
        assert docs_site(None) == SITE
    finally:
        docs_url.package_docs_url.cache_clear()


def test_the_installed_package_names_no_site() -> None:
    """pyproject.toml has no Documentation URL, since there is no site: nothing links by default."""
    assert "Documentation" not in (Path(__file__).resolve().parent.parent / "pyproject.toml").read_text()


def test_rule_pages_are_where_the_mkdocs_site_puts_them() -> None:
    """docs/rules/<CODE>.md becomes <site>/rules/<CODE>/ (MkDocs' directory URLs; test_docs.py builds it)."""
    mkdocs = (Path(__file__).resolve().parent.parent / "mkdocs.yml").read_text()
    assert "use_directory_urls: false" not in mkdocs
    assert rule_url("GPU101", SITE) == f"{SITE}/rules/GPU101/"
    assert rule_url("GPU101", None) is None
