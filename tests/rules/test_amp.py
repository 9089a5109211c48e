"""Mixed-precision rules beyond the fixture cases: rules working together, docs, warning-free GPU003 output."""

from __future__ import annotations

import textwrap
import warnings
from pathlib import Path

import libcst as cst
import pytest

from gpulint.core.settings import Settings
from gpulint.engine.linter import fix_text, lint_text
from gpulint.rules.gpu001_missing_autocast import AMP_DTYPE, MissingAutocast
from tests.fixture_cases import Case, all_cases

AMP = ("GPU001", "GPU002", "GPU003")


def settings(*codes: str, **options: object) -> Settings:
    """`amp_dtype="bfloat16"` sets the option `amp-dtype`."""
    values = {key.replace("_", "-"): value for key, value in options.items()}
    return Settings(select=codes or AMP, preview=True).with_values(values)


def lint(source: str, *codes: str, **options: object) -> list[tuple[int, str]]:
    text = textwrap.dedent(source)
    return [(f.location.row, f.code) for f in lint_text(Path("t.py"), text, settings(*codes, **options)).findings]


def fix(source: str, *codes: str, **options: object) -> str:
    return fix_text(Path("t.py"), textwrap.dedent(source), settings(*codes, **options), unsafe=True).text


@pytest.mark.parametrize("case", [c for c in all_cases() if c.path.parent.name == "GPU001" and c.fixed_path.exists()],
                         ids=lambda c: c.id)
def test_gpu001_fix_leaves_nothing_for_gpu002(case: Case) -> None:
    """The float16 rewrite comes with its GradScaler, so GPU002 has nothing to say afterwards."""
    fixed = case.fixed_path.read_text(encoding="utf-8")
    both = settings("GPU001", "GPU002", amp_dtype=case.settings.value(AMP_DTYPE))
    assert lint_text(case.path, fixed, both).findings == []


ISSUE_EXAMPLE = """
    import torch
    device = torch.device("cuda")
    for data, target in loader:
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = criterion(output, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
"""


def test_the_issue_example_end_to_end() -> None:
    """amp-dtype "auto" (the default): bfloat16 where the GPU computes in it natively, float16 with
    the scaler elsewhere, chosen once at run time; the choice is wrapped at the line length (88)."""
    assert fix(ISSUE_EXAMPLE) == textwrap.dedent("""
        import torch
        device = torch.device("cuda")
        amp_dtype = (
            torch.bfloat16
            if torch.cuda.is_bf16_supported(including_emulation=False)
            else torch.float16
        )
        scaler = torch.amp.GradScaler(device.type, enabled=(amp_dtype == torch.float16))
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=amp_dtype):
                output = model(data)
                loss = criterion(output, target)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
    """)


def test_the_issue_example_with_float16_and_bfloat16() -> None:
    """amp-dtype "float16" writes 0.1's code; "bfloat16" writes no scaler at all."""
    assert fix(ISSUE_EXAMPLE, amp_dtype="float16") == textwrap.dedent("""
        import torch
        device = torch.device("cuda")
        scaler = torch.amp.GradScaler(device.type)
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=torch.float16):
                output = model(data)
                loss = criterion(output, target)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            scaler.step(optimizer)
            scaler.update()
    """)
    assert fix(ISSUE_EXAMPLE, amp_dtype="bfloat16") == textwrap.dedent("""
        import torch
        device = torch.device("cuda")
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer.zero_grad()
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                output = model(data)
                loss = criterion(output, target)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    """)


def test_scaler_above_a_nested_def_gets_a_blank_line_without_indentation() -> None:
    """The blank line PEP 8 wants between the new statements and a nested def is empty: an indented
    one would be trailing whitespace (ruff W293) in the fixed file."""
    fixed = fix("""
        import torch
        import torch.nn as nn

        device = torch.device("cuda")


        def main(loader):
            model = nn.Linear(1024, 1024).to(device)
            optimizer = torch.optim.AdamW(model.parameters(), fused=True)
            # the step
            def step(x, y):
                optimizer.zero_grad()
                loss = nn.functional.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()

            for x, y in loader:
                step(x.to(device), y.to(device))
    """, "GPU001")
    scaler = "scaler = torch.amp.GradScaler(device.type, enabled=(amp_dtype == torch.float16))"
    assert f"{scaler}\n\n    # the step\n" in fixed
    assert not [line for line in fixed.splitlines() if line != line.rstrip()]


def test_fix_is_reported_only_with_unsafe_fixes() -> None:
    source = textwrap.dedent("""
        import torch
        model = torch.nn.Linear(2, 2).cuda()
        for x in loader:
            loss = model(x).sum()
            loss.backward()
            optimizer.step()
    """)
    outcome = fix_text(Path("t.py"), source, settings("GPU001"), unsafe=False)
    assert outcome.text == source and [f.code for f in outcome.findings] == ["GPU001"]


def test_deprecated_autocast_without_scaler_is_fixed_by_both_rules() -> None:
    fixed = fix("""
        import torch
        from torch.cuda.amp import autocast
        model = torch.nn.Linear(2, 2).cuda()
        for x in loader:
            with autocast():
                loss = model(x).sum()
            loss.backward()
            optimizer.step()
    """)
    assert 'from torch.amp import autocast' in fixed and 'with autocast("cuda"):' in fixed
    assert "scaler.scale(loss).backward()" in fixed and "scaler.step(optimizer)" in fixed
    assert lint(fixed) == []


def test_torchfix_counterexample_gives_valid_code() -> None:
    """`from torch.cuda.amp import autocast` + `autocast()` must not become `autocast("cuda", "cuda")`."""
    fixed = fix("""
        from torch.cuda.amp import autocast

        with autocast():
            pass
        with autocast(True):
            pass
    """, "GPU003")
    assert "amp.amp" not in fixed and '"cuda", "cuda"' not in fixed
    assert fixed.count('autocast("cuda"') == 2 and "from torch.amp import autocast" in fixed
    cst.parse_module(fixed)


def test_gpu002_silent_after_gpu003_keeps_bf16() -> None:
    assert lint("""
        import torch
        for x in loader:
            with torch.cuda.amp.autocast(dtype=torch.bfloat16):
                loss = model(x).sum()
            loss.backward()
            optimizer.step()
    """, "GPU002") == []


def test_gpu001_stays_silent_on_a_cpu_only_file_even_when_selected() -> None:
    assert lint("""
        import torch
        device = "cpu"
        for x in loader:
            loss = model(x.to(device)).sum()
            loss.backward()
            optimizer.step()
    """, "GPU001") == []


def test_noqa_silences_gpu001() -> None:
    assert lint("""
        import torch
        model = torch.nn.Linear(2, 2).cuda()
        for x in loader:
            loss = model(x).sum()
            loss.backward()  # noqa: GPU001
            optimizer.step()
    """, "GPU001") == []


def test_gpu001_docs_carry_the_figure_and_its_source() -> None:
    why = MissingAutocast.docs.section("why")
    assert "3x" in why and "Performance Tuning Guide" in why


def test_gpu003_fixed_cases_parse_and_name_torch_amp() -> None:
    for case in all_cases():
        if case.path.parent.name == "GPU003" and case.fixed_path.exists():
            fixed = case.fixed_path.read_text(encoding="utf-8")
            cst.parse_module(fixed)
            assert "amp.amp" not in fixed


# -- with torch: the rewritten code runs and no longer warns -------------------------
RUNNABLE_DEPRECATED = """
import torch
import torch.cuda.amp as cuda_amp
from torch.cpu.amp import autocast as cpu_autocast
from torch.cuda.amp import custom_bwd, custom_fwd


class Double(torch.autograd.Function):
    @staticmethod
    @custom_fwd
    def forward(ctx, x):
        return x * 2

    @staticmethod
    @custom_bwd
    def backward(ctx, grad):
        return grad * 2


with cpu_autocast(True, torch.bfloat16):
    y = torch.ones(2, 2) @ torch.ones(2, 2)
with torch.cpu.amp.autocast(dtype=torch.bfloat16):
    pass
scaler = torch.cpu.amp.GradScaler(init_scale=8.0)
cuda_scaler = cuda_amp.GradScaler(enabled=False)
with torch.cuda.amp.autocast(False):
    pass
result = (y.dtype, scaler.get_scale())
"""


def _run(text: str) -> tuple[dict, list[warnings.WarningMessage]]:
    namespace: dict = {"__name__": "amp_check"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        exec(compile(text, "<amp_check>", "exec"), namespace)  # noqa: S102 - our own test code
    return namespace, list(caught)


@pytest.mark.torch
def test_gpu003_fix_runs_without_future_warnings() -> None:
    torch = pytest.importorskip("torch")  # a guard only: CI installs torch
    before, caught = _run(RUNNABLE_DEPRECATED)
    assert any(issubclass(w.category, FutureWarning) for w in caught), "the original should warn"
    fixed = fix(RUNNABLE_DEPRECATED, "GPU003")
    assert lint(fixed, "GPU003") == []
    after, caught = _run(fixed)
    assert not [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert after["result"] == before["result"] == (torch.bfloat16, 8.0)
