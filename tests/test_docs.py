"""The documentation site: its generated pages are current, and it builds offline without a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scripts.update_docs import DOCS, render_all, stale_rule_pages

ROOT = Path(__file__).resolve().parent.parent


def test_generated_pages_are_current() -> None:
    stale = [str(path.relative_to(ROOT)) for path, text in render_all().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    stale += [str(path.relative_to(ROOT)) for path in stale_rule_pages()]
    assert not stale, f"run: python scripts/update_docs.py ({stale})"


def test_every_rule_has_a_page_in_the_site() -> None:
    from gpulint.rules import all_rules

    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for rule in all_rules():
        assert (DOCS / "rules" / f"{rule.code}.md").exists() and f"rules/{rule.code}.md" in nav


def test_the_site_builds_offline_without_warnings(tmp_path: Path) -> None:
    """`mkdocs build --strict`: a dead link, a missing anchor or a page left out of the nav fails it."""
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "NO_PROXY": "*", "HTTP_PROXY": "http://127.0.0.1:9",
                               "HTTPS_PROXY": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stdout + done.stderr
    page = (site / "rules" / "GPU101" / "index.html").read_text(encoding="utf-8")
    assert "dataloader-without-pin-memory (GPU101)" in page
    assert (site / "notebooks" / "index.html").exists() and (site / "verify-cpu-report.png").exists()
