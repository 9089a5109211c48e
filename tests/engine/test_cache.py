"""The results cache: hits give the same findings, anything changed misses, damage is harmless."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from typing import Any, Optional

import pytest
from click.testing import CliRunner, Result

from gpulint.cli import main
from gpulint.core.settings import Settings
from gpulint.dispatch.jobs import cached_result, run_job, run_jobs
from gpulint.engine import linter
from gpulint.engine.cache import CacheError, ResultCache, clean, is_gpulint_cache
from gpulint.engine.runner import Job, Mode

# a torchvision dataset yields CPU tensors, so GPU101's fix is the safe one (see docs/fix-safety.md)
TRAIN = """\
import torch
from torch.utils.data import DataLoader
from torchvision.datasets import MNIST
device = torch.device("cuda")
loader = DataLoader(MNIST(), batch_size=32)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for images, labels in loader:
    images = images.to(device)
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def entries(directory: Path) -> list[Path]:
    return sorted(directory.glob("v1/*/*.json"))


@pytest.fixture
def train(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(TRAIN)
    return path


def check_job(path: Path, cache: ResultCache, settings: Optional[Settings] = None, mode: Mode = Mode.CHECK) -> Job:
    return Job(path, settings or Settings(), mode, cache=cache)


def test_hit_returns_the_same_findings_without_linting(train: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResultCache.open(tmp_path / "cache")
    first = run_jobs([check_job(train, cache)])[0]
    assert [f.code for f in first.findings] == ["GPU101", "GPU102", "GPU201"]
    assert len(entries(tmp_path / "cache")) == 1

    def no_linting(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a cache hit must not lint")

    monkeypatch.setattr(linter, "lint_text", no_linting)
    monkeypatch.setattr(linter, "fix_text", no_linting)
    second = run_jobs([check_job(train, cache)])[0]
    assert second.findings == first.findings
    assert [f.fix for f in second.findings] == [f.fix for f in first.findings]


def test_directory_is_tagged_and_ignored_by_git(train: Path, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    run_jobs([check_job(train, ResultCache.open(directory))])
    tag = (directory / "CACHEDIR.TAG").read_text()
    assert tag.startswith("Signature: 8a477f597d28d172789f06886806bc55")
    assert (directory / ".gitignore").read_text().splitlines()[-1] == "*"
    assert is_gpulint_cache(directory)
    assert not list(directory.rglob("*.tmp*")) and not list(directory.rglob(".tmp-*")), "temporary files left"


def test_key_changes_with_content_settings_path_and_linter(train: Path, tmp_path: Path) -> None:
    cache = ResultCache.open(tmp_path / "cache")
    raw = train.read_bytes()
    base = cache.key(train, raw, Settings())
    assert cache.key(train, raw, Settings()) == base
    assert cache.key(train, raw + b"\n", Settings()) != base
    assert cache.key(train, raw, Settings().with_values({"num-workers": 8})) != base
    assert cache.key(train, raw, Settings(ignore=("GPU101",))) != base
    assert cache.key(tmp_path / "other.py", raw, Settings()) != base
    other_linter = ResultCache(cache.directory, "another gpulint build")
    assert other_linter.key(train, raw, Settings()) != base


def test_edited_file_is_linted_again(train: Path, tmp_path: Path) -> None:
    cache = ResultCache.open(tmp_path / "cache")
    run_jobs([check_job(train, cache)])
    train.write_text(TRAIN.replace("batch_size=32)", "batch_size=32, pin_memory=True, num_workers=4)"))
    codes = [f.code for f in run_jobs([check_job(train, cache)])[0].findings]
    assert codes == ["GPU201"]


def test_settings_change_is_linted_again(train: Path, tmp_path: Path) -> None:
    cache = ResultCache.open(tmp_path / "cache")
    run_jobs([check_job(train, cache)])
    report = run_jobs([check_job(train, cache, Settings(select=("GPU201",)))])[0]
    assert [f.code for f in report.findings] == ["GPU201"]


@pytest.mark.parametrize("damage", [
    b"", b"{", b"null", b"[]", b'{"key": "other", "findings": []}', b"\x00\xff\xfe garbage",
    b'{"key": "KEY", "findings": [{"code": 1}]}', b'{"key": "KEY", "findings": 7}',
])
def test_corrupt_entry_is_a_miss_and_gets_replaced(train: Path, tmp_path: Path, damage: bytes) -> None:
    cache = ResultCache.open(tmp_path / "cache")
    expected = run_jobs([check_job(train, cache)])[0].findings
    [entry] = entries(tmp_path / "cache")
    key = entry.stem
    entry.write_bytes(damage.replace(b"KEY", key.encode()))
    assert cache.get(key, str(train)) is None
    assert cached_result(check_job(train, cache)) is None
    assert run_jobs([check_job(train, cache)])[0].findings == expected
    assert cache.get(key, str(train)) == expected, "the damaged entry was not rewritten"


def test_unwritable_cache_directory_is_ignored(train: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    cache = ResultCache.open(blocker)
    report = run_jobs([check_job(train, cache)])[0]
    assert [f.code for f in report.findings] == ["GPU101", "GPU102", "GPU201"]
    assert blocker.read_text() == "a file where the cache directory should be"


def _put_many(args: tuple[str, str, int]) -> int:
    directory, path, seed = args
    cache = ResultCache.open(Path(directory))
    job = Job(Path(path), Settings(), Mode.CHECK, cache=cache)
    count = 0
    for _ in range(30):
        report = run_job(job)
        count += len(report.findings)
    return count


def test_concurrent_processes_share_one_cache(train: Path, tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with context.Pool(3) as pool:
        counts = pool.map(_put_many, [(str(directory), str(train), i) for i in range(3)])
    assert counts == [90, 90, 90]
    [entry] = entries(directory)
    data = json.loads(entry.read_bytes())
    assert data["key"] == entry.stem and len(data["findings"]) == 3
    assert not [p for p in directory.rglob("*") if p.name.startswith(".tmp-")]


def test_fix_skips_files_whose_cached_findings_have_no_fix_to_apply(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "train.py"
    path.write_text(TRAIN.replace("torch.optim.AdamW(model.parameters(), lr=1e-3)", "make_optimizer()")
                    .replace("batch_size=32)", "batch_size=32, pin_memory=True)"))
    cache = ResultCache.open(tmp_path / "cache")
    checked = run_jobs([check_job(path, cache)])[0]
    assert [f.code for f in checked.findings] == ["GPU102"]  # its fix is unsafe

    def no_fixing(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("nothing to fix: the cache answers")

    monkeypatch.setattr(linter, "fix_text", no_fixing)
    fixed = run_jobs([check_job(path, cache, mode=Mode.FIX)])[0]
    assert fixed.findings == checked.findings and fixed.fixed == 0
    monkeypatch.undo()
    unsafe = run_jobs([Job(path, Settings(), Mode.FIX, unsafe=True, cache=cache)])[0]
    assert unsafe.fixed == 1 and "num_workers=min(4, os.cpu_count() or 1)" in path.read_text()


def test_fix_stores_the_fixed_files_findings(train: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = ResultCache.open(tmp_path / "cache")
    fixed = run_jobs([check_job(train, cache, mode=Mode.FIX)])[0]
    assert fixed.fixed == 2
    monkeypatch.setattr(linter, "lint_text", lambda *a, **k: pytest.fail("the fixed file should be cached"))
    after = run_jobs([check_job(train, cache)])[0]
    assert [f.code for f in after.findings] == [f.code for f in fixed.findings] == ["GPU102"]


def test_cli_no_cache_writes_nothing_and_cache_dir_option(train: Path, tmp_path: Path) -> None:
    directory = tmp_path / "chosen"
    result = invoke("check", "--no-cache", "--cache-dir", str(directory), str(train))
    assert result.exit_code == 1 and not directory.exists()
    result = invoke("check", "--cache-dir", str(directory), str(train))
    assert result.exit_code == 1 and len(entries(directory)) == 1


def test_cli_cache_dir_from_environment(train: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    directory = tmp_path / "from-env"
    monkeypatch.setenv("GPULINT_CACHE_DIR", str(directory))
    assert invoke("check", str(train)).exit_code == 1
    assert len(entries(directory)) == 1
    result = invoke("clean")
    assert result.exit_code == 0 and f"Removed {directory}" in result.output
    assert not directory.exists()
    result = invoke("clean")
    assert result.exit_code == 0 and "No cache" in result.output


def test_clean_never_removes_a_directory_that_is_not_a_gpulint_cache(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    result = invoke("clean", "--cache-dir", str(precious))
    # gpulint's cache for `--cache-dir precious` would be precious/.gpulint_cache: there is none
    assert result.exit_code == 0 and "No cache at" in result.output and "Traceback" not in result.output
    assert (precious / "thesis.tex").read_text() == "years of work"
    assert clean(precious) is None
    impostor = precious / ".gpulint_cache"  # gpulint's name, someone else's directory
    impostor.mkdir()
    (impostor / "data").write_text("theirs")
    with pytest.raises(CacheError, match="not a gpulint cache"):
        clean(precious)
    assert invoke("clean", "--cache-dir", str(precious)).exit_code == 2
    assert (impostor / "data").read_text() == "theirs"


def test_cli_output_is_identical_cold_and_warm(tmp_path: Path) -> None:
    for i in range(10):  # enough files for the process pool
        (tmp_path / f"train_{i}.py").write_text(TRAIN if i % 2 else TRAIN.replace("AdamW", "Adam"))
    cache = str(tmp_path / "cache")
    cold = invoke("check", "--cache-dir", cache, "--output-format", "json", str(tmp_path))
    warm = invoke("check", "--cache-dir", cache, "--output-format", "json", str(tmp_path))
    uncached = invoke("check", "--no-cache", "-j", "1", "--output-format", "json", str(tmp_path))
    assert cold.exit_code == warm.exit_code == uncached.exit_code == 1
    assert cold.output == warm.output == uncached.output
    assert len(json.loads(cold.output)) == 30


def test_profile_prints_phases_and_rules(train: Path) -> None:
    result = CliRunner().invoke(main, ["check", "--no-cache", "--profile", str(train)])
    assert result.exit_code == 1
    err = result.stderr if hasattr(result, "stderr") else result.output
    for phase in ("read", "parse", "analysis", "rules", "placing"):
        assert f"\n  {phase} " in err
    for code in ("GPU101", "GPU102", "GPU201"):
        assert f"\n  {code} " in err
    assert "(tree walk)" in err


def test_profile_counts_cache_hits(train: Path, tmp_path: Path) -> None:
    cache = str(tmp_path / "cache")
    invoke("check", "--cache-dir", cache, str(train))
    result = CliRunner().invoke(main, ["check", "--cache-dir", cache, "--profile", str(train)])
    err = result.stderr if hasattr(result, "stderr") else result.output
    assert "1 cached" in err and "\n  parse " not in err
    assert os.path.isdir(cache)


def test_a_run_answered_from_the_cache_never_imports_libcst(train: Path, tmp_path: Path) -> None:
    """Importing LibCST is most of a warm run's time; a fully cached run does not need it."""
    import subprocess
    import sys

    cache = str(tmp_path / "cache")
    probe = (
        "import sys\n"
        "from gpulint.cli import run\n"
        f"sys.argv = ['gpulint', 'check', '--cache-dir', {cache!r}, {str(train)!r}]\n"
        "try:\n    run()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('EXIT', code, 'LIBCST', 'libcst' in sys.modules)\n"
    )
    cold = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    # cold, LibCST is loaded only where a finding's fix is predicted on it (GPU001/GPU002) or a rule reads it
    assert "EXIT 1 LIBCST" in cold.stdout, cold.stdout + cold.stderr
    warm = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert warm.stdout.strip().endswith("EXIT 1 LIBCST False"), warm.stdout + warm.stderr
    report = cold.stdout.rsplit("EXIT", 1)[0]
    assert warm.stdout.rsplit("EXIT", 1)[0] == report and "Found 3 findings" in report  # same report
