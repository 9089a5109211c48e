"""Where rule documentation is published, if anywhere.

gpulint has no site of its own. A rule links to a page only when a site is named: by the
`docs-url` setting, or else by the installed package's metadata (a `Documentation` entry in
`[project.urls]`). Without either, no URL is printed anywhere (text, json's `url` is null,
SARIF has no `helpUri`): the rule docs are `gpulint rule CODE` and `docs/rules/` in the
repository. Pages follow the MkDocs site built from docs/: `<site>/rules/<CODE>/`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

_URL = re.compile(r"https?://[^\s/]+(/\S*)?")


def valid_docs_url(value: str) -> bool:
    return bool(_URL.fullmatch(value.strip()))


@lru_cache(maxsize=1)
def package_docs_url() -> Optional[str]:
    """The `Documentation` Project-URL of the installed gpulint, or None."""
    import importlib.metadata

    try:
        entries = importlib.metadata.metadata("gpulint").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip().lower() in ("documentation", "docs") and valid_docs_url(url):
            return url.strip()
    return None


def docs_site(setting: Optional[str]) -> Optional[str]:
    """The site rule links point to: the setting, else the package metadata's; no trailing slash."""
    site = setting.strip() if setting and setting.strip() else package_docs_url()
    return site.rstrip("/") if site else None


def rule_url(code: str, site: Optional[str]) -> Optional[str]:
    """The page of rule `code` on `site` (as the MkDocs site names it), or None without a site."""
    return f"{site}/rules/{code}/" if site else None
