"""GPU301/GPU302 behaviour that the fixture files cannot express on their own."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst
import pytest

from gpulint.core.settings import Settings
from gpulint.engine.linter import fix_text, lint_text
from tests.conftest import Gpulint
from tests.fixture_cases import FIXTURES

PATH = Path("model.py")
BOTH = Settings(select=("GPU301", "GPU302"), preview=True)
# GPU301 reports only models the project trains: the sources below train theirs
TRAIN = """

def train(loader, optimizer):
    model = Model()
    for x in loader:
        model(x).sum().backward()
        optimizer.step()
"""


def _model(depth_expr: str, header: str = "") -> str:
    return textwrap.dedent(f"""\
        import torch
        from torch import nn
        {header}

        class Model(nn.Module):
            def __init__(self, d=8):
                super().__init__()
                self.blocks = nn.Sequential(*[nn.Linear(d, d) for _ in range({depth_expr})])

            def forward(self, x):
                x = self.blocks(x)
                return x
        """) + TRAIN


def _codes(text: str, settings: Settings = BOTH) -> list[str]:
    return [f.code for f in lint_text(PATH, text, settings).findings]


@pytest.mark.parametrize(("depth", "segments"), [(8, 3), (9, 3), (12, 3), (16, 4), (24, 5), (50, 7)])
def test_segments_are_rounded_square_root_of_depth(depth: int, segments: int) -> None:
    fixed = fix_text(PATH, _model(str(depth)), BOTH, unsafe=True).text
    assert f"checkpoint_sequential(self.blocks, {segments}, x, use_reentrant=False)" in fixed


@pytest.mark.parametrize("minimum", [4, 8, 12])
def test_min_depth_is_inclusive(minimum: int) -> None:
    settings = Settings(select=("GPU301",), preview=True).with_values({"checkpoint-min-depth": minimum})
    assert _codes(_model(str(minimum)), settings) == ["GPU301"]
    assert _codes(_model(str(minimum - 1)), settings) == []


def test_depth_arithmetic_on_module_constants() -> None:
    assert _codes(_model("LAYERS * 2", header="LAYERS = 4")) == ["GPU301"]
    assert _codes(_model("LAYERS - 1", header="LAYERS = 8")) == []
    assert _codes(_model("2, LAYERS", header="LAYERS = 10")) == ["GPU301"]  # range(2, 10): 8 blocks


def test_reassigned_constant_is_not_a_known_depth() -> None:
    text = _model("LAYERS", header="LAYERS = 16; LAYERS = 2")
    assert _codes(text) == []
    # a wide line length keeps the generated call on one line for the assertion below
    unknown = Settings(select=("GPU301",), preview=True).with_values({"checkpoint-unknown-depth": True,
                                                                       "line-length": 200})
    assert _codes(text, unknown) == ["GPU301"]
    fixed = fix_text(PATH, text, unknown, unsafe=True).text
    assert "checkpoint_sequential(self.blocks, round(len(self.blocks) ** 0.5), x, use_reentrant=False)" in fixed


def test_message_states_depth_and_trade() -> None:
    (finding,) = lint_text(PATH, _model("16"), BOTH).findings
    assert "16 blocks" in finding.message
    assert finding.fix is not None and finding.fix.applicability.value == "unsafe"
    assert "one extra forward" in finding.fix.message  # the trade is the fix's detail


def test_gpu301_is_preview_only() -> None:
    assert _codes(_model("16"), Settings()) == []
    assert _codes(_model("16"), Settings(preview=True)) == ["GPU301"]


def test_gpu301_reports_only_models_the_project_trains() -> None:
    untrained = _model("16").replace(TRAIN, "")
    assert _codes(untrained) == []
    evaluated = untrained + "\nmodel = Model().eval()\nout = model(x)\n"
    assert _codes(evaluated) == []


def test_gpu301_fix_leaves_nothing_for_gpu302() -> None:
    """The rewrite passes use_reentrant=False itself, and one fix run settles both rules."""
    text = (FIXTURES / "GPU301" / "deep_mlp_runtime.py").read_text(encoding="utf-8")
    assert sorted(set(_codes(text))) == ["GPU301"]
    outcome = fix_text(PATH, text, BOTH, unsafe=True)
    assert outcome.findings == []
    assert fix_text(PATH, outcome.text, BOTH, unsafe=True).text == outcome.text


def test_safe_fix_run_leaves_unsafe_fixes_alone() -> None:
    text = _model("16") + "\nfrom torch.utils.checkpoint import checkpoint\ny = checkpoint(print, 1)\n"
    outcome = fix_text(PATH, text, BOTH, unsafe=False)
    assert outcome.text == text
    assert sorted(f.code for f in outcome.findings) == ["GPU301", "GPU302"]


def test_fix_edits_forward_while_report_points_at_construction() -> None:
    text = _model("16")
    (finding,) = lint_text(PATH, text, BOTH).findings
    construction_row = text.splitlines().index(
        "        self.blocks = nn.Sequential(*[nn.Linear(d, d) for _ in range(16)])") + 1
    assert finding.location.row == construction_row
    assert finding.fix is not None
    edited_rows = {edit.location.row for edit in finding.fix.edits}
    assert any(row > construction_row for row in edited_rows)  # forward, below the construction


def test_gpu301_fixed_forward_keeps_eval_path() -> None:
    fixed = fix_text(PATH, _model("16"), BOTH, unsafe=True).text
    forward = fixed[fixed.index("def forward"):]
    assert "if self.training and torch.is_grad_enabled():" in forward
    assert "else:\n            x = self.blocks(x)" in forward
    cst.parse_module(fixed)


def test_self_parameter_with_another_name() -> None:
    text = textwrap.dedent("""\
        import torch
        from torch import nn

        class Model(nn.Module):
            def __init__(this, d=8):
                super().__init__()
                this.layers = nn.ModuleList([nn.Linear(d, d) for _ in range(16)])

            def forward(me, x):
                for layer in me.layers:
                    x = layer(x)
                return x
        """) + TRAIN
    fixed = fix_text(PATH, text, BOTH.with_values({"line-length": 200}), unsafe=True).text
    assert "checkpoint(layer, x, use_reentrant=False) if me.training and torch.is_grad_enabled() else layer(x)" in fixed


def test_stack_assigned_twice_is_not_reported() -> None:
    text = _model("16").replace(
        "        self.blocks = nn.Sequential(*[nn.Linear(d, d) for _ in range(16)])\n",
        "        self.blocks = nn.Sequential(*[nn.Linear(d, d) for _ in range(16)])\n"
        "        if d > 4:\n            self.blocks = nn.Sequential(nn.Linear(d, d))\n",
    )
    assert _codes(text) == []


def test_gpu302_does_not_fire_on_gpu301_output_with_aliases() -> None:
    text = (FIXTURES / "GPU301" / "existing_aliases_reused.py").read_text(encoding="utf-8")
    fixed = fix_text(PATH, text, BOTH, unsafe=True).text
    assert "cp.checkpoint_sequential(self.blocks, 4, x, use_reentrant=False)" in fixed
    assert _codes(fixed) == []


@pytest.mark.parametrize("source", [
    "from torch.utils.checkpoint import checkpoint\ncheckpoint(f, x, **{'use_reentrant': False})\n",
    "from torch.utils.checkpoint import checkpoint\nkw = {}\nkw['use_reentrant'] = False\ncheckpoint(f, x, **kw)\n",
    "from torch.utils.checkpoint import checkpoint_sequential\ncheckpoint_sequential(f, 2, *inputs)\n",
    "import torch\ntorch.utils.checkpoint.checkpoint_wrapper(m)\n",
])
def test_gpu302_silent_when_use_reentrant_is_or_may_be_given(source: str) -> None:
    assert _codes(source) == []


def test_gpu302_bad_syntax_is_a_gpu000_not_a_crash() -> None:
    findings = lint_text(PATH, "from torch.utils.checkpoint import checkpoint\ncheckpoint(f,\n", BOTH).findings
    assert [f.code for f in findings] == ["GPU000"]


@pytest.mark.torch
def test_saved_tensor_bytes_counts_unique_storages_exactly() -> None:
    torch = pytest.importorskip("torch")
    from tests.saved_memory import saved_tensor_bytes

    weight = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8, requires_grad=True)
    # mm saves x and weight; the view x.t() shares x's storage; exp saves its 4x8 result
    measured = saved_tensor_bytes(lambda: ((x @ weight) + (x.t().t() @ weight)).exp().sum(), exclude=[weight])
    assert measured.storages == 2
    assert measured.bytes == 4 * 8 * 4 + 4 * 8 * 4  # x, and exp's output (float32)
    everything = saved_tensor_bytes(lambda: (x @ weight).sum())
    assert everything.bytes == 4 * 8 * 4 + 8 * 8 * 4
    measured.result.backward()
    assert weight.grad is not None


HF_SCRIPT = """\
import torch
from peft import LoraConfig
from transformers import AutoModel

model = AutoModel.from_pretrained("org/chat-model").cuda()
model.gradient_checkpointing_enable()
model.add_adapter(LoraConfig(r=8, target_modules=["query", "value"]))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
for batch in loader:
    model(**batch).loss.backward()
    optimizer.step()
"""


@pytest.mark.parametrize(("pin", "reported"), [
    ("transformers==4.27.1\n", False),  # blind10: ChatGLM-Tuning's requirements.txt
    ("transformers<4.30\n", False),
    ("transformers~=4.28.0\n", False),
    ("transformers>=4.35\n", True),
    ("transformers<4.35.1\n", True),  # admits 4.35.0
    ("transformers\n", True),  # unpinned
    ("datasets==2.10.1\n", True),  # names no transformers
])
def test_gpu302_hf_call_needs_a_transformers_that_takes_the_kwargs(tmp_path: Path, pin: str, reported: bool) -> None:
    """`gradient_checkpointing_kwargs` exists from transformers 4.35 on: where the project's pins admit only older
    releases, the advice cannot be followed, and the call is not reported (CURRENT_TRANSFORMERS)."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "requirements.txt").write_text("torch>=1.13.1\n" + pin, encoding="utf-8")
    (tmp_path / "project" / "finetune.py").write_text(HF_SCRIPT, encoding="utf-8")
    output = Gpulint(False, tmp_path / "cache").check(
        "--preview", "--select", "GPU302", "--output-format", "concise", tmp_path / "project").output
    assert ("GPU302" in output) is reported


@pytest.mark.parametrize(("pin", "kwargs", "reported"), [
    ("transformers>=5.4.0\n", "", False),  # blind19: open-instruct's pyproject; 5.0 on defaults to non-reentrant
    ("transformers==5.0.0\n", "gradient_checkpointing_kwargs=None", False),  # None: Transformers' default again
    ("transformers>=5.4.0\n", "gradient_checkpointing_kwargs={}", True),  # torch's default: reentrant
    ("transformers>=4.40,<6\n", "", True),  # admits 4.x, which passes use_reentrant=True
    ("transformers==4.57.1\n", "", True),
])
def test_gpu302_hf_call_on_transformers_5_is_already_non_reentrant(tmp_path: Path, pin: str, kwargs: str,
                                                                   reported: bool) -> None:
    """From transformers 5.0, `gradient_checkpointing_enable()` passes `use_reentrant=False` to torch when no
    `gradient_checkpointing_kwargs` (or `None`) is given: where every release the pins admit is 5.0 or later, the
    call is not reentrant and the fix would change nothing (REENTRANT_DEFAULT)."""
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "requirements.txt").write_text("torch>=2.4\n" + pin, encoding="utf-8")
    enable = "model.gradient_checkpointing_enable("
    script = HF_SCRIPT.replace(enable + ")", enable + kwargs + ")")
    (tmp_path / "project" / "finetune.py").write_text(script, encoding="utf-8")
    output = Gpulint(False, tmp_path / "cache").check(
        "--preview", "--select", "GPU302", "--output-format", "concise", tmp_path / "project").output
    assert ("GPU302" in output) is reported


def test_gpu302_a_changed_transformers_pin_is_not_answered_from_the_cache(tmp_path: Path) -> None:
    gpulint = Gpulint(True, tmp_path / "cache")
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text("transformers==4.27.1\n", encoding="utf-8")
    (project / "finetune.py").write_text(HF_SCRIPT, encoding="utf-8")
    args = ("--preview", "--select", "GPU302", "--output-format", "concise", project)
    assert "GPU302" not in gpulint.check(*args).output
    (project / "requirements.txt").write_text("transformers>=4.35\n", encoding="utf-8")
    assert "GPU302" in gpulint.check(*args).output
