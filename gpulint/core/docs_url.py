"""Where rule documentation is published, if anywhere.

gpulint has no site of its own. A rule links to a page only when a site is named: by the
`docs-url` setting, or else by the installed package's metadata (a `Documentation` entry in
`[project.urls]`). Without either, no URL is printed anywhere (text, json's `url` is null,
SARIF has no `helpUri`): the rule docs are `gpulint rule CODE` and `docs/rules/` in the
repository. Pages follow the MkDocs site built from docs/: `<site>/rules/<CODE>/`.
"""

from __future__ import annotations

import os
import re
import sys
from functools import lru_cache
from typing import Optional

_URL = re.compile(r"https?://[^\s/]+(/\S*)?")


def valid_docs_url(value: str) -> bool:
    return bool(_URL.fullmatch(value.strip()))


@lru_cache(maxsize=1)
def package_docs_url() -> Optional[str]:
    """The `Documentation` Project-URL of the installed gpulint, or None."""
    entries = _project_urls()
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("documentation", "docs") and valid_docs_url(url):
            return url.strip()
    return None


def _project_urls() -> list[str]:
    """The Project-URL entries of the installed gpulint. The first `gpulint-*.dist-info` on sys.path is
    read directly, where importlib.metadata would find it: importing that module and its email parser
    costs a run with findings more than reading the cache does."""
    for entry in sys.path:
        folder = entry or "."
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.startswith("gpulint-") and name.endswith(".dist-info"):
                try:
                    with open(os.path.join(folder, name, "METADATA"), encoding="utf-8") as handle:
                        headers = handle.read().split("\n\n", 1)[0]
                except (OSError, UnicodeDecodeError):
                    return _project_urls_from_importlib()
                return [line.split(":", 1)[1].strip() for line in headers.splitlines()
                        if line.lower().startswith("project-url:")]
    return _project_urls_from_importlib()  # an egg-info or a zipped install


def _project_urls_from_importlib() -> list[str]:
    import importlib.metadata

    try:
        return importlib.metadata.metadata("gpulint").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return []


def docs_site(setting: Optional[str]) -> Optional[str]:
    """The site rule links point to: the setting, else the package metadata's; no trailing slash."""
    site = setting.strip() if setting and setting.strip() else package_docs_url()
    return site.rstrip("/") if site else None


def rule_url(code: str, site: Optional[str]) -> Optional[str]:
    """The page of rule `code` on `site` (as the MkDocs site names it), or None without a site."""
    return f"{site}/rules/{code}/" if site else None
