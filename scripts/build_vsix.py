"""Build the VS Code extension (`editors/vscode`) into an installable `.vsix`, reproducibly.

    python scripts/build_vsix.py [--out DIR]      # writes DIR/gpulint-<version>.vsix (default DIR: dist/)
    code --install-extension dist/gpulint-<version>.vsix

Needs Node.js 20 or newer with npm, and access to the npm registry. The extension's sources
are copied to a temporary folder, where `npm ci` installs exactly what the committed
package-lock.json pins (vscode-languageclient for the extension, @vscode/vsce to package it;
integrity hashes checked, install scripts not run), and vsce packages them. Nothing is written
in the checkout but the .vsix: no node_modules, no lockfile change. With SOURCE_DATE_EPOCH
(default: the time of the last commit that touched editors/vscode) every file in the archive
carries the same date in the same order, so two builds of one commit give the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTENSION = ROOT / "editors" / "vscode"
# what goes into the package, besides what npm ci installs (tests stay behind: see .vscodeignore)
SOURCES = ("package.json", "package-lock.json", "extension.js", "README.md", ".vscodeignore")
MIN_NODE = 20
FALLBACK_EPOCH = 315532800  # 1980-01-01, the earliest date a zip archive can hold


class BuildError(Exception):
    """Why the extension cannot be built here, in one line."""


def _run(command: list[str], cwd: Path, env: dict[str, str]) -> str:
    try:
        done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise BuildError(f"{command[0]}: not found") from None
    if done.returncode != 0:
        raise BuildError(f"`{' '.join(command)}` failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def check_node(env: dict[str, str]) -> str:
    """The Node.js version; BuildError when node or npm is missing or too old."""
    for tool in ("node", "npm"):
        if shutil.which(tool, path=env.get("PATH")) is None:
            raise BuildError(f"{tool} is not installed: the extension needs Node.js {MIN_NODE} or newer with npm")
    version = _run(["node", "--version"], ROOT, env).strip()
    match = re.match(r"v(\d+)\.", version)
    if match is None or int(match.group(1)) < MIN_NODE:
        raise BuildError(f"node {version}: the extension's packager (@vscode/vsce) needs Node.js {MIN_NODE} or newer")
    return version


def source_date_epoch(env: dict[str, str]) -> str:
    """SOURCE_DATE_EPOCH from the environment, else the last commit of editors/vscode, else 1980-01-01."""
    if env.get("SOURCE_DATE_EPOCH", "").isdigit():
        return env["SOURCE_DATE_EPOCH"]
    try:
        done = subprocess.run(["git", "log", "-1", "--format=%ct", "--", str(EXTENSION)], cwd=ROOT,
                              capture_output=True, text=True, check=False)
    except FileNotFoundError:
        done = None
    stamp = done.stdout.strip() if done is not None and done.returncode == 0 else ""
    return stamp if stamp.isdigit() else str(FALLBACK_EPOCH)


def build(out: Path, env: dict[str, str]) -> Path:
    """Build the .vsix into `out`; returns its path."""
    check_node(env)
    manifest = json.loads((EXTENSION / "package.json").read_text(encoding="utf-8"))
    target = out.resolve() / f"{manifest['name']}-{manifest['version']}.vsix"
    env = {**env, "SOURCE_DATE_EPOCH": source_date_epoch(env)}
    with tempfile.TemporaryDirectory(prefix="gpulint-vsix-") as folder:
        staging = Path(folder) / "extension"
        staging.mkdir()
        for name in SOURCES:
            shutil.copyfile(EXTENSION / name, staging / name)
        license_file = ROOT / "LICENSE"
        if license_file.is_file():
            shutil.copyfile(license_file, staging / "LICENSE")
        _run(["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund"], staging, env)
        out.mkdir(parents=True, exist_ok=True)
        packaged = Path(folder) / target.name
        vsce = staging / "node_modules" / ".bin" / "vsce"
        _run([str(vsce), "package", "--out", str(packaged), "--allow-missing-repository",
              *([] if license_file.is_file() else ["--skip-license"])], staging, env)
        shutil.move(str(packaged), target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="folder for the .vsix (default: dist/)")
    args = parser.parse_args()
    try:
        target = build(args.out, dict(os.environ))
    except BuildError as exc:
        print(f"build_vsix: error: {exc}", file=sys.stderr)
        sys.exit(2)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    print(f"{target}  sha256 {digest}")
    print(f"install it with: code --install-extension {target}")


if __name__ == "__main__":
    main()
