"""Hostile input: gpulint answers with one-line messages and exit codes, never a traceback,
and never loses a byte of the user's files. Every test runs with the results cache on and off
(the cache reads files on a path of its own)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import gpulint.cli as cli
import gpulint.cli.lint as cli_lint
from gpulint.core import source
from gpulint.engine import linter
from gpulint.engine.guard import MAX_CHARS, MAX_DEPTH

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (docs/fix-safety.md)
TRAIN = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST
device = torch.device("cuda")
loader = DataLoader(MNIST(), batch_size=32)
for images, labels in loader:
    images = images.to(device)
"""
# GPU101's fix also makes the copies of the loader's batches asynchronous
FIXED = TRAIN.replace("batch_size=32)", "batch_size=32, pin_memory=True)").replace(
    "images.to(device)", "images.to(device, non_blocking=True)")


CACHE: list[str] = []  # ["--no-cache"] or [] (the cache on), set for each test by `cache_mode`


@pytest.fixture(autouse=True, params=["cache", "no-cache"])
def cache_mode(request: pytest.FixtureRequest) -> None:
    CACHE[:] = ["--no-cache"] if request.param == "no-cache" else []


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args), catch_exceptions=False)


def check(*paths: Path, extra: tuple[str, ...] = ()) -> Result:
    return invoke("check", *CACHE, *extra, *map(str, paths))


def fix(*paths: Path, extra: tuple[str, ...] = ()) -> Result:
    return invoke("fix", *CACHE, *extra, *map(str, paths))


def assert_no_traceback(result: Result) -> None:
    assert "Traceback" not in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception


def findings_for(result: Result, path: Path) -> list[str]:
    """`CODE message` of every finding line for `path` in concise output."""
    out = []
    for line in result.stdout.splitlines():
        if line.startswith(f"{path}:"):
            rest = line[len(str(path)) + 1:]
            out.append(rest.split(": ", 1)[1] if ": " in rest else rest)
    return out


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(directory)): (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode))
            for p in sorted(directory.rglob("*")) if p.is_file() and not p.is_symlink()}


def no_temp_files(directory: Path) -> bool:
    return not [p for p in directory.rglob("*") if p.name.endswith(".gpulint-tmp")]


# -- input gpulint cannot analyse ----------------------------------------------------------

def test_syntax_error_is_one_line_with_position_and_others_are_linted(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from torch.utils.data import DataLoader\n\ndef train(:\n    DataLoader(ds)\n")
    good = tmp_path / "good.py"
    good.write_text(TRAIN)
    result = check(bad, good)
    assert_no_traceback(result)
    assert result.exit_code == EXIT_FINDINGS
    [line] = [ln for ln in result.stdout.splitlines() if ln.startswith(str(bad))]
    assert line.startswith(f"{bad}:3:11: GPU000 SyntaxError")
    assert [f.split()[0] for f in findings_for(result, good)] == ["GPU101", "GPU102"]


@pytest.mark.parametrize("text", [
    'print "hello"\n',
    "exec \"x = 1\"\n",
    "x = `1`\n",
    "def f():\n    raise ValueError, 'no'\n",
    "x = 0777L\n",
    "from torch.utils.data import DataLoader\nprint DataLoader(ds)\n",
])
def test_python2_file_is_a_syntax_error_finding(tmp_path: Path, text: str) -> None:
    path = tmp_path / "py2.py"
    path.write_text(text if "torch" in text else f"import torch\n{text}")
    result = check(path)
    assert_no_traceback(result)
    assert result.exit_code == EXIT_FINDINGS
    [finding] = findings_for(result, path)
    assert finding.startswith("GPU000 SyntaxError")


@pytest.mark.parametrize("text", ['print "hello"\n', "x = 0777L\n"])
def test_python2_file_naming_no_torch_is_silent_unless_pedantic(tmp_path: Path, text: str) -> None:
    """blind16/blind17 (SEAL's node2vec, GraphCL's result collector): a vendored Python 2 script that never names
    torch holds nothing any rule reads, so nothing went unchecked; pedantic still reports it."""
    path = tmp_path / "py2.py"
    path.write_text(text)
    result = check(path)
    assert_no_traceback(result)
    assert result.exit_code == 0 and findings_for(result, path) == []
    config = tmp_path / "gpulint.toml"
    config.write_text('strictness = "pedantic"\n')
    result = check(path, extra=("--config", str(config)))
    [finding] = findings_for(result, path)
    assert finding.startswith("GPU000 SyntaxError")


@pytest.mark.parametrize("raw, reason", [
    (b"x = '\xff\xfe caf\xe9'\n", "cannot decode as utf-8"),
    (b"# -*- coding: klingon -*-\nx = 1\n", "encoding"),
    (b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00", "binary"),
    (bytes(range(256)) * 4, "binary"),
    (b"\xef\xbb\xbf# -*- coding: latin-1 -*-\nx = 1\n", "coding declaration says 'latin-1'"),
])
def test_undecodable_or_binary_file_is_reported_and_left_alone(tmp_path: Path, raw: bytes, reason: str) -> None:
    path = tmp_path / "weird.py"
    path.write_bytes(raw)
    for result in (check(path), fix(path, extra=("--unsafe-fixes",))):
        assert_no_traceback(result)
        assert result.exit_code == EXIT_FINDINGS
        [finding] = findings_for(result, path)
        assert finding.startswith("GPU000 cannot lint file:") and reason in finding
    assert path.read_bytes() == raw


@pytest.mark.parametrize("raw", [b"", b"\n", b"   \n\t\n", b"# only a comment", b"\xef\xbb\xbf", b"\r\n\r\n"])
def test_empty_files_are_clean_and_untouched(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "empty.py"
    path.write_bytes(raw)
    assert check(path).exit_code == EXIT_CLEAN
    result = fix(path, extra=("--unsafe-fixes",))
    assert_no_traceback(result)
    assert result.exit_code == EXIT_CLEAN
    assert path.read_bytes() == raw


def test_ten_megabyte_file_is_refused_quickly_and_left_alone(tmp_path: Path) -> None:
    parts, size, i = ["from torch.utils.data import DataLoader\n"], 0, 0
    while size < 10 * 2**20:
        parts.append(f"def f{i}(x):\n    return x * {i}\n\n")
        size += len(parts[-1])
        i += 1
    text = "".join(parts) + "loader = DataLoader(ds)\n"
    assert 10 * 2**20 < len(text) < 10.05 * 2**20 and len(text) > MAX_CHARS
    path = tmp_path / "huge.py"
    path.write_text(text)
    raw = path.read_bytes()
    for result in (check(path), fix(path, extra=("--unsafe-fixes",))):
        assert_no_traceback(result)
        assert result.exit_code == EXIT_FINDINGS
        [finding] = findings_for(result, path)
        assert finding.startswith("GPU000 file is too large to analyse (10.")
    assert path.read_bytes() == raw
    # no rule can match: nothing to parse, nothing to report
    plain = tmp_path / "data.py"
    plain.write_text("DATA = [\n" + "    1.0,\n" * (11 * 2**20 // 9) + "]\n")
    result = check(plain)
    assert result.exit_code == EXIT_CLEAN, result.output


DEEP = {
    # each of these crashes (SIGSEGV) or hangs LibCST's native parser if it ever reaches it
    "parens.py": "x = " + "(" * 5000 + "1" + ")" * 5000 + "\n",
    "lists.py": "x = " + "[" * 3000 + "]" * 3000 + "\n",
    "and_chain.py": "x = " + " and ".join(["a"] * 30000) + "\n",
    "plus_chain.py": "x = " + " + ".join(["1"] * 30000) + "\n",
    "subscripts.py": "x = a" + "[0]" * 3000 + "\n",
    "unary.py": "x = " + "-" * 30000 + "1\n",
    "lambdas.py": "f = " + "lambda: " * 2000 + "1\n",
    "calls.py": "x = f" + "()" * 30000 + "\n",
}


def test_expressions_nested_thousands_deep_never_crash(tmp_path: Path) -> None:
    header = "import torch\nfrom torch.utils.data import DataLoader\nloader = DataLoader(ds)\n"
    for name, body in DEEP.items():
        (tmp_path / name).write_text(header + body)
    (tmp_path / "train.py").write_text(TRAIN)  # still linted alongside
    # in a subprocess: a crash of the native parser would kill pytest itself
    proc = subprocess.run([sys.executable, "-m", "gpulint", "check", *CACHE, "-j", "2", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_FINDINGS, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stdout + proc.stderr
    for name in DEEP:
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(str(tmp_path / name) + ":")]
        assert len(lines) == 1 and " GPU000 " in lines[0], (name, lines)
        assert "nested" in lines[0] or "SyntaxError" in lines[0], lines[0]
    assert sum(1 for ln in proc.stdout.splitlines() if ln.startswith(str(tmp_path / "train.py"))) == 2


def test_moderately_deep_real_nesting_is_still_linted(tmp_path: Path) -> None:
    path = tmp_path / "deep_ok.py"
    path.write_text(TRAIN + "x = " + " + ".join(["1"] * (MAX_DEPTH // 2)) + "\n")
    result = check(path)
    assert [f.split()[0] for f in findings_for(result, path)] == ["GPU101", "GPU102"]


# -- the file system working against us -----------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "symlink"), reason="no symlinks on this platform")
def test_symlink_loops_and_dangling_links(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "loop").symlink_to(tmp_path, target_is_directory=True)  # a directory cycle
    (tmp_path / "a.py").symlink_to(tmp_path / "b.py")
    (tmp_path / "b.py").symlink_to(tmp_path / "a.py")  # a file cycle
    (tmp_path / "dangling.py").symlink_to(tmp_path / "nowhere.py")
    result = check(tmp_path)
    assert_no_traceback(result)
    assert result.exit_code == EXIT_FINDINGS
    assert [f.split()[0] for f in findings_for(result, tmp_path / "train.py")] == ["GPU101", "GPU102"]
    # named explicitly, a looping link is an error finding with the OS's reason, in one line
    result = check(tmp_path / "a.py")
    assert_no_traceback(result)
    [finding] = findings_for(result, tmp_path / "a.py")
    assert finding.startswith("GPU000 cannot lint file:") and "symbolic links" in finding


def _unreadable(monkeypatch: pytest.MonkeyPatch, target: Path) -> None:
    """Make `target` unreadable the way chmod 000 does for a normal user (root reads through it)."""
    real = os.open

    def guarded_open(path, flags, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if os.path.abspath(path) == os.path.abspath(target):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)


def test_unreadable_file_is_reported_and_others_are_linted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text(TRAIN)
    (tmp_path / "train.py").write_text(TRAIN)
    _unreadable(monkeypatch, secret)
    result = check(tmp_path)
    assert_no_traceback(result)
    assert result.exit_code == EXIT_FINDINGS
    assert findings_for(result, secret) == ["GPU000 cannot lint file: permission denied"]
    assert len(findings_for(result, tmp_path / "train.py")) == 2


@pytest.mark.skipif(IS_ROOT, reason="root reads files whatever their mode; the monkeypatched test covers this")
def test_unreadable_file_really_chmod_000(tmp_path: Path) -> None:
    secret = tmp_path / "secret.py"
    secret.write_text(TRAIN)
    secret.chmod(0)
    try:
        result = check(secret)
        assert findings_for(result, secret) == ["GPU000 cannot lint file: permission denied"]
    finally:
        secret.chmod(0o644)


def test_unreadable_directory_is_a_finding_and_the_rest_is_linted(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text(TRAIN)
    (tmp_path / "train.py").write_text(TRAIN)
    real_scandir = os.scandir

    def scandir(path=".") -> object:  # noqa: ANN001 - os.scandir's signature
        if os.path.abspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    if IS_ROOT:  # chmod cannot lock root out: fail the way the OS would for a normal user
        monkeypatch.setattr(os, "scandir", scandir)
    else:
        locked.chmod(0)
    try:
        result = check(tmp_path)
    finally:
        locked.chmod(0o755)
    assert_no_traceback(result)
    assert result.exit_code == EXIT_FINDINGS
    # its files went unchecked: a finding every output format shows, not a warning CI passes over
    assert findings_for(result, locked) == [
        "GPU000 cannot lint directory: Permission denied; its files were not checked"]
    assert len(findings_for(result, tmp_path / "train.py")) == 2
    assert not findings_for(result, locked / "hidden.py")


def test_path_that_vanishes_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(10):  # enough for the process pool
        (tmp_path / f"train_{i}.py").write_text(TRAIN)
    gone = tmp_path / "train_3.py"
    collect = cli_lint.collect_jobs

    def collect_then_delete(*args: Any, **kwargs: Any) -> Any:
        jobs = collect(*args, **kwargs)
        gone.unlink()
        return jobs

    monkeypatch.setattr(cli_lint, "collect_jobs", collect_then_delete)
    result = check(tmp_path, extra=("-j", "2"))
    assert_no_traceback(result)
    assert result.exit_code == EXIT_FINDINGS
    assert findings_for(result, gone) == ["GPU000 cannot lint file: file vanished before it could be read"]
    assert len(findings_for(result, tmp_path / "train_4.py")) == 2


def _during_fix(monkeypatch: pytest.MonkeyPatch, action) -> None:  # noqa: ANN001
    """Run `action(path)` after gpulint read a file and computed its fixes, before it writes."""
    real = linter.fix_text

    def fix_text(path: Any, *args: Any, **kwargs: Any) -> Any:
        outcome = real(path, *args, **kwargs)
        action(Path(path))
        return outcome

    monkeypatch.setattr(linter, "fix_text", fix_text)


def test_file_changed_between_read_and_write_is_skipped_and_reported(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    theirs = TRAIN + "# saved by the editor meanwhile\n"
    _during_fix(monkeypatch, lambda p: p.write_text(theirs))
    result = fix(path)
    assert_no_traceback(result)
    assert f"gpulint: warning: {path}: file changed during fix, skipped (not written)" in result.stderr
    assert path.read_text() == theirs
    assert result.exit_code == EXIT_FINDINGS  # the findings still stand
    assert no_temp_files(tmp_path)


def test_file_deleted_between_read_and_write_is_not_recreated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    _during_fix(monkeypatch, lambda p: p.unlink())
    result = fix(path)
    assert_no_traceback(result)
    assert "file vanished before the fix could be written" in result.stderr
    assert not path.exists() and no_temp_files(tmp_path)


def test_read_only_file_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    path.chmod(0o444)
    try:
        result = fix(path)
        assert_no_traceback(result)
        assert f"gpulint: warning: {path}: file is read-only; fix not written" in result.stderr
        assert path.read_text() == TRAIN and stat.S_IMODE(path.stat().st_mode) == 0o444
        assert result.exit_code == EXIT_FINDINGS
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize("failure", ["mkstemp", "write", "fsync", "chmod", "replace"])
def test_any_write_failure_leaves_the_original_byte_identical(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch, failure: str) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(TRAIN.encode())
    path.chmod(0o640)
    before = snapshot(tmp_path)

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")

    if failure == "mkstemp":
        monkeypatch.setattr(tempfile, "mkstemp", boom)
    elif failure == "write":
        real_fdopen = os.fdopen

        class Full:
            def __init__(self, handle) -> None:  # noqa: ANN001
                self.handle = handle

            def __enter__(self):  # noqa: ANN204
                return self

            def __exit__(self, *exc) -> None:  # noqa: ANN002
                self.handle.close()

            def write(self, data: bytes) -> int:
                self.handle.write(data[: len(data) // 2])
                raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fdopen", lambda fd, *a, **k: Full(real_fdopen(fd, *a, **k)))
    else:
        monkeypatch.setattr(os, failure, boom)
    result = fix(path)
    monkeypatch.undo()
    assert_no_traceback(result)
    assert "No space left on device" in result.stderr
    assert snapshot(tmp_path) == before, "the original changed or a temporary file was left behind"


def test_fifo_named_py_does_not_hang(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)
    (tmp_path / "train.py").write_text(TRAIN)
    result = check(tmp_path)
    assert_no_traceback(result)
    assert findings_for(result, fifo) == ["GPU000 cannot lint file: not a regular file"]
    assert len(findings_for(result, tmp_path / "train.py")) == 2


# -- text that is unusual but valid: fixed exactly, nothing else touched ---------------------

def test_crlf_file_keeps_crlf(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(TRAIN.replace("\n", "\r\n").encode())
    assert fix(path).exit_code == EXIT_FINDINGS  # GPU102 remains (unsafe fix)
    assert path.read_bytes() == FIXED.replace("\n", "\r\n").encode()


def test_mixed_newlines_are_kept_line_by_line(tmp_path: Path) -> None:
    lines = TRAIN.splitlines()
    endings = ["\r\n", "\n", "\r\n", "\n", "\r\n", "\n", "\r\n"]
    path = tmp_path / "train.py"
    path.write_bytes("".join(ln + e for ln, e in zip(lines, endings)).encode())
    fix(path)
    fixed_lines = FIXED.splitlines()
    assert path.read_bytes() == "".join(ln + e for ln, e in zip(fixed_lines, endings)).encode()


def test_bom_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "train.py"
    path.write_bytes(b"\xef\xbb\xbf" + TRAIN.encode())
    result = check(path)
    assert findings_for(result, path)[0].startswith("GPU101")
    assert result.stdout.splitlines()[0].startswith(f"{path}:5:10: GPU101")  # columns ignore the BOM
    fix(path)
    assert path.read_bytes() == b"\xef\xbb\xbf" + FIXED.encode()


def test_tab_indented_code_is_fixed_with_tabs(tmp_path: Path) -> None:
    text = ("import torch\nfrom torch.utils.data import DataLoader\n\ndevice = torch.device('cuda')\n\n"
            "def make(ds):\n\tif ds:\n\t\treturn DataLoader(\n\t\t\tds,\n\t\t\tbatch_size=8,\n\t\t)\n")
    path = tmp_path / "tabs.py"
    path.write_text(text)
    (tmp_path / "gpulint.toml").write_text('strictness = "pedantic"\n')  # where the batches go is not shown
    fix(path, extra=("--unsafe-fixes", "--select", "GPU101"))  # a parameter: the pin_memory fix is unsafe
    assert path.read_text() == text.replace("\t\t\tbatch_size=8,\n", "\t\t\tbatch_size=8,\n\t\t\tpin_memory=True,\n")


def test_non_ascii_identifiers_and_strings(tmp_path: Path) -> None:
    text = ('import torch\nfrom torch.utils.data import DataLoader as Chargeur\n\n'
            'périphérique = torch.device("cuda")\njeu_de_données = [torch.zeros(3)] * 3\n'
            'chargeur_ñ = Chargeur(jeu_de_données, batch_size=2)  # «commentaire»\n'
            'for lot_é in chargeur_ñ:\n    lot_é = lot_é.to(périphérique, non_blocking=True)\n')
    path = tmp_path / "données.py"
    path.write_text(text, encoding="utf-8")
    result = check(path)
    assert result.stdout.splitlines()[0] == (
        f"{path}:6:14: GPU101 [*] DataLoader without pin_memory=True: its batches' copies to the GPU cannot run "
        "asynchronously")
    fix(path)
    assert path.read_text(encoding="utf-8") == text.replace("batch_size=2)", "batch_size=2, pin_memory=True)")


def test_fix_keeps_mode_and_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    path.chmod(0o751)
    replaced: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(src, dst):  # noqa: ANN001, ANN202
        if os.path.dirname(os.path.abspath(dst)) == str(tmp_path):  # not the cache's own entries
            replaced.append((os.path.basename(src), os.path.basename(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(source.os, "replace", spy)
    fix(path)
    assert path.read_text() == FIXED and stat.S_IMODE(path.stat().st_mode) == 0o751
    assert len(replaced) == 1 and replaced[0][1] == "train.py" and replaced[0][0].endswith(".gpulint-tmp")
    assert no_temp_files(tmp_path)


# -- gpulint's own bugs ------------------------------------------------------------------------

def test_internal_error_is_one_line_and_v_shows_the_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpulint.rules.gpu101_dataloader_without_pin_memory import DataLoaderPinMemory

    def broken(self, ctx) -> None:  # noqa: ANN001
        raise KeyError("simulated bug")

    monkeypatch.setattr(DataLoaderPinMemory, "detect", broken)  # the rule detects on `ast` (issue 25)
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    other = tmp_path / "clean.py"
    other.write_text("import torch\nprint(torch.ones(1))\n")  # no rule can match: not affected
    result = check(tmp_path)
    assert result.exit_code == EXIT_ERROR
    assert "Traceback" not in result.output
    errors = [ln for ln in result.stderr.splitlines() if "internal error" in ln]
    assert errors == [f"gpulint: internal error: {path}: KeyError in rules: 'simulated bug'"]
    assert "run with -v" in result.stderr
    verbose = check(tmp_path, extra=("-v",))
    assert verbose.exit_code == EXIT_ERROR
    assert "Traceback (most recent call last)" in verbose.stderr and "simulated bug" in verbose.stderr
    assert path.read_text() == TRAIN
