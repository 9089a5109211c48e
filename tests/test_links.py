"""Every link and file reference in the repository resolves, and no URL points where nothing is.

Markdown links and images (with their #anchors), file paths written in backticks in Markdown,
and paths of this repository named in Markdown, YAML and TOML files must exist. Absolute URLs
in those files and in gpulint's own source must be on the list below: pages known to exist.
gpulint has no site, package or tag of its own; a site is named only by the `docs-url` setting.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# URLs that resolve, each checked by hand when it was added; a new URL must be added here
KNOWN_URLS = {
    "https://pre-commit.com",  # pre-commit's home page (.pre-commit-hooks.yaml)
    "https://download.pytorch.org/whl/cpu",  # PyTorch's CPU wheel index (README install)
    "https://json.schemastore.org/sarif-2.1.0.json",  # SARIF's $schema, as GitHub documents it
    "https://bford.info/cachedir/",  # the CACHEDIR.TAG specification (cache directory tag)
}
# files a script writes, named before they exist, and why they do not exist yet
WRITTEN_LATER = {"docs/verification.md": "scripts/gpu_verify.sh writes it on a GPU machine; not run yet"}
# prose about the files of other repositories (the precision corpus), not of this one
OTHER_REPOSITORIES = ("bench/precision/",)
DOC_SUFFIXES = (".md", ".yaml", ".yml", ".toml")
_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.M)
_CODE = re.compile(r"`([^`\n]+)`")
_URL = re.compile(r"https?://[^\s)\"'`<>\]]+")


def _tracked() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name and (ROOT / name).is_file()]


FILES = _tracked()
DOCS = [p for p in FILES if p.suffix in DOC_SUFFIXES or p.name == ".pre-commit-hooks.yaml"]
TOP = {p.relative_to(ROOT).parts[0] for p in FILES if len(p.relative_to(ROOT).parts) > 1}
# a path of this repository written in prose: a top-level folder, then more of a path
_REPO_PATH = re.compile(r"(?<![\w./~-])((?:" + "|".join(sorted(map(re.escape, TOP))) + r")/[\w./-]*[\w/])")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


def _exists(relative: str) -> bool:
    return (ROOT / relative).exists() or relative in WRITTEN_LATER


def _about_this_repository(path: Path) -> bool:
    return not str(path.relative_to(ROOT)).startswith(OTHER_REPOSITORIES)


def _prose(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return _FENCE.sub("", text) if path.suffix == ".md" else text


def _check_target(source: Path, target: str) -> str | None:
    """Why a link target does not resolve, or None."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # a URL (checked separately) or mailto:
        return None
    path_part, _, anchor = target.partition("#")
    resolved = (source.parent / path_part).resolve() if path_part else source
    if not resolved.exists():
        return f"{target}: no such file"
    if anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
        return f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("path", [p for p in DOCS if p.suffix == ".md"], ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_links_resolve(path: Path) -> None:
    text = _prose(path)
    linkable = _CODE.sub("", text)  # `OPTIMIZERS[name](...)` in a code span is no link
    targets = [m.group(1) for m in _LINK.finditer(linkable)] + _REFERENCE.findall(linkable)
    problems = [p for p in (_check_target(path, t) for t in targets) if p]
    for code in _CODE.findall(text) if _about_this_repository(path) else []:
        if "/" in code and not re.search(r"[\s*?<>{}$~|]", code) and code.split("/")[0] in TOP:
            if not _exists(code.split(":")[0].rstrip("/")):
                problems.append(f"`{code}`: no such file")
    assert not problems, problems


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_paths_named_in_docs_and_config_exist(path: Path) -> None:
    text = _URL.sub("", _prose(path))
    text = re.sub(r"[\w.-]*[*?{<][^\s`'\"]*", "", text)  # globs and placeholders are patterns, not files
    found = _REPO_PATH.findall(text) if _about_this_repository(path) else []
    missing = sorted({m for m in found if not _exists(m.rstrip("/."))})
    assert not missing, f"{path.relative_to(ROOT)} names files that do not exist: {missing}"


def test_urls_are_known_to_resolve() -> None:
    sources = DOCS + [p for p in FILES if p.suffix == ".py" and p.relative_to(ROOT).parts[0] in ("gpulint", "scripts")]
    unknown = {}
    for path in sources:
        for url in _URL.findall(path.read_text(encoding="utf-8")):
            url = url.rstrip(".,;:").replace("\\n", "")
            if url not in KNOWN_URLS:
                unknown.setdefault(url, str(path.relative_to(ROOT)))
    assert not unknown, f"URLs not known to resolve (gpulint has no site; see docs-url): {unknown}"


def test_the_checks_catch_what_they_should(tmp_path: Path) -> None:
    """Guards the tests above: a dead link, a dead anchor and a missing file are each caught."""
    page = ROOT / "README.md"
    assert _check_target(page, "docs/nope.md") is not None
    assert _check_target(page, "#no-such-heading") is not None
    assert _check_target(page, "#exit-codes") is None and _check_target(page, "examples/README.md") is None
    assert _REPO_PATH.findall("see docs/workflows.md, gpulint/cli.py") == ["docs/workflows.md", "gpulint/cli.py"]
    assert _slug("What gpulint will never do to your files") == "what-gpulint-will-never-do-to-your-files"


def test_every_kind_of_reference_is_covered() -> None:
    """The files whose references must resolve are all checked: README, docs/, examples/README.md,
    the pre-commit manifest, pyproject.toml (its URLs and paths) and mkdocs.yml."""
    checked = {str(p.relative_to(ROOT)) for p in DOCS}
    for name in ("README.md", "examples/README.md", ".pre-commit-hooks.yaml", "pyproject.toml", "mkdocs.yml",
                 "docs/index.md", "docs/workflows.md", "docs/rules/GPU101.md"):
        assert name in checked, name
    assert all(str(p.relative_to(ROOT)) in checked for p in (ROOT / "docs").rglob("*.md") if p in FILES)
