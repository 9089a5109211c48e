"""The AST prefilter: files reach LibCST only when a rule could fire, and it never hides a finding.

The proof of the superset claim is empirical and exact: findings with the prefilter equal
findings without it (`ast_prefilter.ENABLED = False`) over every file in fixtures/ and over
a seeded sample of the installed torch package's sources, plus generated training code.
"""

from __future__ import annotations

import ast
import importlib.util
import random
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given

from gpulint.core.findings import Finding
from gpulint.core.settings import Settings
from gpulint.engine import ast_prefilter
from gpulint.engine.ast_prefilter import AstFacts, scan, text_may_meet
from gpulint.engine.guard import MAX_DEPTH
from gpulint.engine.linter import enabled_rules, lint_text
from gpulint.rules import all_rules
from tests.engine.test_properties import ci, training_programs

ROOT = Path(__file__).resolve().parents[2]
ALL = Settings(preview=True)  # every rule, preview ones included
PATH = Path("train.py")
TORCH_SAMPLE = 300
TORCH_SEED = 11
# torch 2.13 files where rules fire, so the torch comparison has findings to lose
TORCH_WITH_FINDINGS = (
    "testing/_internal/common_quantization.py",
    "testing/_internal/distributed/distributed_test.py",
    "testing/_internal/distributed/rpc/examples/parameter_server_test.py",
    "testing/_internal/distributed/rpc/examples/reinforcement_learning_rpc_test.py",
)


def facts(code: str) -> AstFacts:
    return scan(ast.parse(code))


def lint(text: str, settings: Settings = ALL, enabled: bool = True, path: Path = PATH) -> list[Finding]:
    previous = ast_prefilter.ENABLED
    ast_prefilter.ENABLED = enabled
    try:
        return lint_text(path, text, settings).findings
    finally:
        ast_prefilter.ENABLED = previous


# -- what the scan resolves -------------------------------------------------------------------

@pytest.mark.parametrize("code, qualified", [
    ("import torch.optim as optim\noptim.Adam(p)", "torch.optim.Adam"),
    ("from torch.utils import data\ndata.DataLoader(ds)", "torch.utils.data.DataLoader"),
    ("import torch as th\nth.optim.AdamW(p)", "torch.optim.AdamW"),
    ("import torch.utils.data\ntorch.utils.data.DataLoader(ds)", "torch.utils.data.DataLoader"),
    ("from torch.optim import SGD as Sgd\nSgd(p)", "torch.optim.SGD"),
    ("def make(p):\n    from torch.optim import Adagrad\n    return Adagrad(p)", "torch.optim.Adagrad"),
    ("class M:\n    def f(self):\n        import torch.cuda.amp as amp\n        return amp.GradScaler()",
     "torch.cuda.amp.GradScaler"),
    ("from torch.cuda.amp import autocast", "torch.cuda.amp.autocast"),  # the import alone is a use
    ("from torch.cuda.amp import *", "torch.cuda.amp"),
])
def test_resolves_through_every_import_form(code: str, qualified: str) -> None:
    assert qualified in facts(code).qualified


@pytest.mark.parametrize("code", [
    "from .optim import Adam\nAdam(p)",
    "from . import optim\noptim.Adam(p)",
    "from .torch.optim import Adam\nAdam(p)",
    "from ..torch import optim\noptim.Adam(p)",
])
def test_relative_imports_resolve_to_nothing(code: str) -> None:
    # the alias table never resolves a relative import either (core/names.py)
    assert not facts(code).has("torch.optim.Adam")


def test_names_without_imports_resolve_to_nothing() -> None:
    scanned = facts("class Adam:\n    pass\nopt = Adam(p)\ntorch.optim.Adam(p)  # torch never imported\n")
    assert not scanned.has("torch.optim.Adam")
    assert "torch.optim.Adam" not in str(scanned.qualified)


def test_every_binding_of_a_name_counts() -> None:
    # `t` is bound to two modules in two scopes: both resolutions are kept
    scanned = facts("def a():\n    import torch as t\ndef b():\n    import numpy as t\nt.optim.Adam(p)\n")
    assert {"torch.optim.Adam", "numpy.optim.Adam"} <= scanned.qualified


def test_called_attributes_only_when_called() -> None:
    scanned = facts("loss.backward()\nstep = optimizer.step\nx.y.zero_grad()\n")
    assert scanned.has(".backward(") and scanned.has(".zero_grad(")
    assert not scanned.has(".step(")


def test_wildcard_needle_needs_prefix_and_suffix() -> None:
    assert facts("import torch.nn as nn\nnn.Sequential()").has("torch.nn.*Sequential")
    assert facts("from torch.nn.modules.container import Sequential").has("torch.nn.*Sequential")
    assert not facts("import torch.nn as nn\nnn.Linear(2, 2)").has("torch.nn.*Sequential")
    assert not facts("from keras import Sequential").has("torch.nn.*Sequential")


def test_groups_must_all_match() -> None:
    needles = ((".backward(", "torch.autograd.backward"), (".step(",))
    assert facts("loss.backward()\nopt.step()").meets(needles)
    assert facts("from torch.autograd import backward\nbackward(loss)\nopt.step()").meets(needles)
    assert not facts("loss.backward()").meets(needles)
    assert facts("pass").meets(None)


def test_text_cooccurrence_follows_the_needles() -> None:
    needles = ((".backward(", "torch.autograd.backward"), (".step(",))
    assert text_may_meet(needles, "loss.backward()\nopt.step()")
    assert not text_may_meet(needles, "loss.backward()\n")
    assert text_may_meet(None, "")


def test_every_rule_needle_is_well_formed() -> None:
    for rule in all_rules():
        for group in rule.ast_needles or ():
            assert group, rule.code
            for needle in group:
                called = needle.startswith(".") and needle.endswith("(")
                assert called or (needle.count("*") <= 1 and not needle.startswith(".")), (rule.code, needle)


# -- what reaches LibCST ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "import torch\n# a DataLoader, an Adam optimizer, checkpoint, autocast and backward, all in comments\n",
    'import torch\nHELP = "use torch.optim.Adam(fused=True) and torch.utils.data.DataLoader"\n',
    "from mylib import DataLoader, Adam\nDataLoader(ds)\nAdam(p)\n",
    "import torch\nmodel.cuda()\nloss.backward()  # no optimizer step anywhere\n",
    "import torch.nn as nn\nlayers = nn.Sequential(nn.Linear(2, 2))  # no nn.Module subclass\n",
])
def test_files_no_rule_can_flag_are_not_parsed(text: str, parses: list[str]) -> None:
    assert lint(text) == []
    assert parses == []
    assert lint(text, enabled=False) == []
    # the text prefilter alone would have parsed it, for a rule still on LibCST; rules on `ast` never need the
    # parse to report (GPU101/GPU102/GPU201 carry the "DataLoader"/"Adam" needles and detect on `ast`)
    on_libcst = any(not r.on_ast and r.may_match(text) for r in enabled_rules(ALL))
    assert parses == ([text] if on_libcst else [])


# each with a model on the GPU: GPU201 asks for an accelerator in the project (FUSED_DEVICE)
GPU201_CASES = [
    "import torch.optim as optim\nopt = optim.Adam(model.parameters())\nmodel.cuda()\n",
    "from torch.utils import data\nimport torch\nopt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
    "model.cuda()\n",
    "import torch as th\nopt = th.optim.AdamW(model.parameters())\nmodel.cuda()\n",
    "def make(model):\n    from torch.optim import Adam\n    return Adam(model.parameters())\nmodel.cuda()\n",
    "def make(model):\n    import torch.optim as o\n    return o.Adagrad(model.parameters())\nmodel.cuda()\n",
]


@pytest.mark.parametrize("text", GPU201_CASES)
def test_aliased_and_function_level_imports_still_flagged(text: str) -> None:
    codes = [f.code for f in lint(text)]
    assert codes == ["GPU201"]
    assert lint(text) == lint(text, enabled=False)


# the models on the GPU: GPU201 asks for an accelerator in the project (FUSED_DEVICE)
SHADOWING_CASES = [
    # a local `torch` in one function must not hide the module-level import used elsewhere
    ("import torch\ndef helper():\n    torch = None\n    return torch\n"
     "opt = torch.optim.Adam(model.cuda().parameters())\n"),
    # a parameter named like the alias, and the alias used in another function
    ("import torch.optim as optim\ndef f(optim):\n    return optim\n"
     "def g(model):\n    return optim.Adam(model.cuda().parameters())\n"),
    # the same name imported in two functions from two places
    ("def a(model):\n    from torch.optim import Adam\n    return Adam(model.cuda().parameters())\n"
     "def b():\n    from mylib import Adam\n    return Adam\n"),
    # a class attribute shadowing nothing at module level
    ("import torch\nclass Trainer:\n    torch = 1\n"
     "    def opt(self, m):\n        return torch.optim.Adam(m.cuda().parameters())\n"),
]


@pytest.mark.parametrize("text", SHADOWING_CASES)
def test_shadowing_never_skips_a_flagged_file(text: str) -> None:
    without = lint(text, enabled=False)
    assert [f.code for f in without] == ["GPU201"]  # the case is real: the full analysis flags it
    assert lint(text) == without


def test_shadowed_import_passes_and_stays_silent(parses: list[str]) -> None:
    # the alias table refuses `Adam` (also bound locally); the prefilter lets it through, unsure, to
    # GPU201's detector, which reads the `ast` tree: LibCST is never parsed for a rule on `ast` (issue 25)
    text = "from torch.optim import Adam\nAdam = make_adam\nopt = Adam(model.parameters())\n"
    assert lint(text) == lint(text, enabled=False) == []
    assert parses == []


def test_a_user_class_named_like_torchs_costs_no_libcst_parse(parses: list[str]) -> None:
    """Only GPU201 could look at this file, and it decides on `ast`: no parse with or without the prefilter."""
    text = "import torch\nclass Adam:\n    pass\nopt = Adam(model.parameters())\n"
    assert lint(text) == lint(text, enabled=False) == []
    assert parses == []


def test_unused_suppressions_still_reported(parses: list[str]) -> None:
    text = "import torch\nx = 1  # noqa: GPU101\n# a DataLoader in a comment\n"
    settings = Settings(select=("GPU101", "GPU900"))
    assert [f.code for f in lint(text, settings)] == ["GPU900"]
    assert parses
    assert lint(text, settings) == lint(text, settings, enabled=False)


def test_unused_suppressions_alone_skip_nothing_else(parses: list[str]) -> None:
    text = "import torch\nx = 1  # gpulint: ignore[GPU201]\nHELP = 'torch.optim.Adam'\n"
    assert [f.code for f in lint(text)] == ["GPU900"]
    assert lint(text) == lint(text, enabled=False)


def test_syntax_errors_still_reported() -> None:
    text = "import torch\nloader = DataLoader(ds\n"
    assert [f.code for f in lint(text)] == ["GPU000"]


def test_too_deep_files_still_refused_before_the_ast_check() -> None:
    # passes the text prefilter (DataLoader), fails the AST check, and is too deep for LibCST:
    # the GPU000 refusal does not depend on the AST prefilter
    text = "import torch\nx = " + " and ".join(["a"] * (MAX_DEPTH + 10)) + "\n# DataLoader\n"
    with_filter, without = lint(text), lint(text, enabled=False)
    assert [f.code for f in with_filter] == ["GPU000"]
    assert with_filter == without


@ci(150)
@given(training_programs())
def test_generated_training_code_same_findings(text: str) -> None:
    assert lint(text) == lint(text, enabled=False)


# -- exactness over real files ----------------------------------------------------------------

def fixture_files() -> list[Path]:
    return sorted((ROOT / "fixtures").rglob("*.py"))


@dataclass
class Comparison:
    flagged_files: int = 0
    findings: int = 0
    parsed_without: int = 0  # files LibCST parsed with the text prefilter only
    parsed_with: int = 0  # ... and with the AST prefilter too


def compare(paths: list[Path], parses: list[str]) -> Comparison:
    """Lint every file with and without the AST prefilter; the findings must be identical."""
    result = Comparison()
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        start = len(parses)
        without = lint(text, enabled=False, path=path)
        middle = len(parses)
        with_filter = lint(text, path=path)
        assert with_filter == without, path
        result.parsed_without += middle - start
        result.parsed_with += len(parses) - middle
        result.flagged_files += bool(with_filter)
        result.findings += len(with_filter)
    return result


def test_fixtures_same_findings(parses: list[str]) -> None:
    paths = fixture_files()
    assert len(paths) > 100
    result = compare(paths, parses)
    assert result.flagged_files > 50  # the comparison has findings to lose
    assert result.parsed_with <= result.parsed_without


@pytest.mark.slow
def test_torch_sources_same_findings(parses: list[str]) -> None:
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed: no real corpus to compare on")
    root = Path(spec.origin).parent
    files = sorted(p for p in root.rglob("*.py") if p.is_file())
    chosen = set(random.Random(TORCH_SEED).sample(files, min(TORCH_SAMPLE, len(files))))
    chosen |= {root / name for name in TORCH_WITH_FINDINGS if (root / name).is_file()}
    result = compare(sorted(chosen), parses)
    assert result.findings > 0  # the comparison has findings to lose
    # every detector reads `ast` since GPU301's port: LibCST parses only the files whose fixes are predicted,
    # the same with the filter or without it (it saved parses while rules still detected on LibCST)
    assert result.parsed_with <= result.parsed_without
