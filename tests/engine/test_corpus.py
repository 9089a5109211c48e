"""Real code at scale: a fixed sample of the installed torch package's own sources.

`check` must finish without an internal error on every file, and after
`fix --unsafe-fixes` every file must still compile. The sample is bounded (150 files, a
fixed seed) so the test runs in CI in well under a minute on two cores.
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import warnings
from pathlib import Path

import pytest

from gpulint.core.settings import Settings
from gpulint.dispatch.jobs import run_jobs
from gpulint.engine.guard import python_check
from gpulint.engine.runner import Job, Mode

SAMPLE = 150
SEED = 7
# torch 2.13 files where rules with fixes fire, so the fix half of the test has work to do;
# the random sample alone is library code where nothing fires
WITH_FIXES = (
    "testing/_internal/common_quantization.py",
    "testing/_internal/distributed/distributed_test.py",
    "testing/_internal/distributed/rpc/examples/parameter_server_test.py",
    "testing/_internal/distributed/rpc/examples/reinforcement_learning_rpc_test.py",
)
ALL = Settings(preview=True)

pytestmark = pytest.mark.slow


def torch_sources() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed: no real corpus to lint")
    return Path(spec.origin).parent


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = torch_sources()
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    chosen = set(random.Random(SEED).sample(files, min(SAMPLE, len(files))))
    chosen |= {root / name for name in WITH_FIXES if (root / name).is_file()}
    chosen = sorted(chosen)
    target = tmp_path_factory.mktemp("torch-corpus")
    out = []
    for src in chosen:
        dst = target / src.relative_to(root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
        out.append(dst)
    return out


def compiles(text: str, path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, str(path), "exec", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def test_check_completes_on_real_code(corpus: list[Path]) -> None:
    reports = run_jobs([Job(p, ALL, Mode.CHECK) for p in corpus], workers=2)
    assert len(reports) == len(corpus)
    errors = [r.internal_error[0] for r in reports if r.internal_error]
    assert not errors, errors
    for report in reports:
        text = Path(report.path).read_text(encoding="utf-8")
        unreadable = [f for f in report.findings if f.code == "GPU000"]
        if python_check(text, before_libcst=False).valid:
            assert not unreadable, (report.path, unreadable)


def test_every_fixed_file_compiles(corpus: list[Path]) -> None:
    before = {p: p.read_text(encoding="utf-8") for p in corpus}
    reports = run_jobs([Job(p, ALL, Mode.FIX, unsafe=True) for p in corpus], workers=2)
    errors = [r.internal_error[0] for r in reports if r.internal_error]
    assert not errors, errors
    assert not [r.write_error for r in reports if r.write_error]
    for path in corpus:
        after = path.read_text(encoding="utf-8")
        if compiles(before[path], path):
            assert compiles(after, path), f"{path}: the fixed file does not compile"
        else:
            assert after == before[path], f"{path}: a file that did not compile was changed"
    changed = [p for p in corpus if p.read_text(encoding="utf-8") != before[p]]
    fixed = sum(r.fixed for r in reports)
    assert fixed > 0 and changed, "no fix applied to the corpus: this test no longer checks fixed files"
