"""The VS Code extension's contract, without VS Code (issue 28).

- Its settings schema (package.json) declares exactly what the server reads, with the same JSON
  types, and its defaults read as the server's defaults.
- Its manifest, activation events and commands, and its `gpulint.path` setting: the Node tests
  in editors/vscode/test/ run extension.js against fakes of the VS Code API, and start the
  configured executable as the language client would (it must answer `initialize`).
- Its package is reproducible: pinned versions and a committed lockfile; the slow test builds the
  .vsix twice with scripts/build_vsix.py (npm ci, vsce) and compares the bytes.

Node.js is needed for the last two. Where it is missing they are skipped and say so, except
when GPULINT_REQUIRE_NODE=1 (CI sets it): there a missing Node.js fails them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import gpulint
from gpulint.server.analysis import CLIENT_SETTINGS, SETTING_TYPES, EditorSettings

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = ROOT / "editors" / "vscode"
MANIFEST = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
PROPERTIES = MANIFEST["contributes"]["configuration"]["properties"]


def _node_or_skip(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        message = f"{' and '.join(missing)} not installed"
        if os.environ.get("GPULINT_REQUIRE_NODE") == "1":
            pytest.fail(f"{message}, and GPULINT_REQUIRE_NODE=1 requires the extension's tests to run")
        pytest.skip(message)


def _server_key(setting: str) -> str:
    return setting.removeprefix("gpulint.")


def test_the_settings_schema_declares_what_the_server_reads() -> None:
    server_keys = {_server_key(k) for k in PROPERTIES if _server_key(k).split(".")[0] not in CLIENT_SETTINGS}
    assert server_keys == set(SETTING_TYPES)
    for key, kinds in SETTING_TYPES.items():
        declared = PROPERTIES[f"gpulint.{key}"]["type"]
        assert set([declared] if isinstance(declared, str) else declared) == set(kinds), key
    client_only = {_server_key(k).split(".")[0] for k in PROPERTIES} - set(SETTING_TYPES)
    assert client_only == CLIENT_SETTINGS  # `path` and `trace.server`: read by the extension and VS Code


def test_the_schemas_defaults_are_the_servers_defaults() -> None:
    """What VS Code sends when nothing is set: initializationOptions is the configuration section,
    dotted keys nested (`trace.server` -> {"trace": {"server": ...}}), the extension's own keys included."""
    sent: dict = {}
    for key, schema in PROPERTIES.items():
        *parents, leaf = _server_key(key).split(".")
        table = sent
        for parent in parents:
            table = table.setdefault(parent, {})
        table[leaf] = schema["default"]
    assert EditorSettings.read(sent) == (EditorSettings(), [])
    assert EditorSettings.read({"gpulint": sent}) == (EditorSettings(), [])  # as didChangeConfiguration sends it


def test_the_extension_is_pinned_and_versioned_with_gpulint() -> None:
    assert MANIFEST["version"] == gpulint.__version__
    lock = json.loads((EXTENSION / "package-lock.json").read_text(encoding="utf-8"))
    root = lock["packages"][""]
    for table in ("dependencies", "devDependencies"):
        for name, version in MANIFEST[table].items():
            assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name} {version}: pin an exact version"
            assert root[table][name] == version and lock["packages"][f"node_modules/{name}"]["version"] == version
    assert all("integrity" in entry for name, entry in lock["packages"].items() if name), "every package hashed"
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8")
    assert "editors/vscode/node_modules/" in ignored and "editors/vscode/*.vsix" in ignored
    assert "package-lock.json" not in ignored


def test_the_extension_runs_against_the_vscode_api_and_starts_the_configured_server() -> None:
    _node_or_skip("node")
    executable = shutil.which("gpulint", path=os.path.dirname(sys.executable)) or shutil.which("gpulint")
    assert executable is not None, "gpulint is installed with this Python"
    done = subprocess.run(["node", "--test", "test/"], cwd=EXTENSION, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "GPULINT_EXECUTABLE": executable})
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^# fail 0$", done.stdout, re.M) and re.search(r"^# skipped 0$", done.stdout, re.M)
    assert int(re.search(r"^# pass (\d+)$", done.stdout, re.M).group(1)) >= 7  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_vsix_builds_reproducibly(tmp_path: Path) -> None:
    _node_or_skip("node", "npm")
    digests, packages = [], []
    for attempt in ("first", "second"):
        build = [sys.executable, str(ROOT / "scripts" / "build_vsix.py"), "--out", str(tmp_path / attempt)]
        done = subprocess.run(build, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        [package] = (tmp_path / attempt).glob("*.vsix")
        packages.append(package)
        digests.append(hashlib.sha256(package.read_bytes()).hexdigest())
    assert digests[0] == digests[1]  # same commit, same bytes
    assert packages[0].name == f"gpulint-{gpulint.__version__}.vsix"
    names = zipfile.ZipFile(packages[0]).namelist()
    assert {"extension.vsixmanifest", "extension/package.json", "extension/extension.js"} <= set(names)
    assert "extension/node_modules/vscode-languageclient/package.json" in names  # what the extension requires
    assert not [n for n in names if n.startswith(("extension/test/", "extension/node_modules/@vscode/vsce"))]
    assert not (EXTENSION / "node_modules").exists()  # built elsewhere: the checkout is left alone
