"""GPU201 where a flag chooses between CUDA and the CPU, on a torch with the fused CUDA kernels but not the CPU
ones (2.2): `fused=<the flag's test>`, bare where the test is a bool, in `bool(...)` where it may not be
(blind10: transformer-xl's `torch.device('cuda' if args.cuda else 'cpu')` with `--cuda` a store_true option)."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Optional

import pytest

from gpulint.core.settings import Settings
from gpulint.engine.linter import fix_text, lint_text

PARSER = """\
import argparse
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--cuda", action="store_true")
parser.add_argument("--gpu", type=int, default=None)
args = parser.parse_args()
"""
STEP = """\
model = torch.nn.Linear(8, 8).to(device)
optimizer = torch.optim.Adam(model.parameters())
for x in loader:
    model(x.to(device)).sum().backward()
    optimizer.step()
"""


def _fused(source: str) -> Optional[str]:
    """The `fused=` value the fix writes, "" for a finding without that fix, None for no finding."""
    settings = Settings(select=("GPU201",), preview=True).with_values({"torch-version": (2, 2)})
    text = textwrap.dedent(source)
    found = [f for f in lint_text(Path("train.py"), text, settings).findings if f.code == "GPU201"]
    if not found:
        return None
    fixed = fix_text(Path("train.py"), text, settings, unsafe=True).text
    written = [k.value for n in ast.walk(ast.parse(fixed)) if isinstance(n, ast.Call) for k in n.keywords
               if k.arg == "fused"]
    return ast.get_source_segment(fixed, written[0]) if written else ""


@pytest.mark.parametrize(("choice", "fused"), [
    ('device = torch.device("cuda" if args.cuda else "cpu")\n', "args.cuda"),
    # stored again from bools only: still a bool
    ('args.cuda = args.cuda and torch.cuda.is_available()\ndevice = "cuda" if args.cuda else "cpu"\n',
     "args.cuda"),
    ('args.cuda = 1\ndevice = "cuda" if args.cuda else "cpu"\n', "bool(args.cuda)"),
    ('device = "cpu" if not args.cuda else "cuda"\n', "args.cuda"),
    ('if args.cuda:\n    device = "cuda:0"\nelse:\n    device = "cpu"\n', "args.cuda"),
    ('device = "cuda" if args.cuda else "mps" if torch.backends.mps.is_available() else "cpu"\n', "args.cuda"),
    ('device = f"cuda:{args.gpu}" if args.gpu is not None else "cpu"\n', "args.gpu is not None"),
    ('device = "cuda" if args.gpu else "cpu"\n', "bool(args.gpu)"),  # an int option
    ('use_cuda = torch.cuda.device_count() > 0\ndevice = "cuda" if use_cuda else "cpu"\n', "use_cuda"),
    ('use_cuda = True\nif args.gpu is None:\n    use_cuda = False\ndevice = "cuda" if use_cuda else "cpu"\n',
     "use_cuda"),
    ('use_cuda = os.environ.get("USE_CUDA")\ndevice = "cuda" if use_cuda else "cpu"\n', "bool(use_cuda)"),
    # bound again between the choice and the optimizer: not read there
    ('device = "cuda" if args.cuda else "cpu"\nargs = load_config()\n', None),
    ('device = "cuda" if args.cuda else "cpu"\nargs.cuda = False\n', None),
    ('device = "cuda" if args.cuda else "cpu"\nsetattr(args, name, value)\n', None),
    # two tests: the parameters follow neither alone
    ('device = "cuda" if args.cuda else "cpu"\nother = "cuda" if torch.cuda.is_available() else "cpu"\n', None),
    ('device = "cuda" if args.cuda else "cpu"\nother = "cuda" if args.gpu else "cpu"\n', None),
    # the true branch is not CUDA: not a choice of CUDA by the flag
    ('device = "cuda:1" if args.cuda else ("xla" if args.tpu else "cpu")\n', "args.cuda"),
    ('device = "mps" if args.cuda else "cpu"\n', None),
])
def test_a_flag_that_chooses_cuda_is_the_fused_value(choice: str, fused: Optional[str]) -> None:
    assert _fused(PARSER + "import os\n" + choice + STEP) == fused


def test_a_flag_read_in_another_function_is_not_followed() -> None:
    source = PARSER + 'def get_device():\n    return "cuda" if args.cuda else "cpu"\ndevice = get_device()\n' + STEP
    assert _fused(source) is None


def test_an_attribute_of_self_is_wrapped() -> None:
    source = PARSER + textwrap.dedent("""\
        class Trainer:
            def fit(self, loader):
                device = "cuda" if self.use_gpu else "cpu"
                model = torch.nn.Linear(8, 8).to(device)
                optimizer = torch.optim.Adam(model.parameters())
                for x in loader:
                    model(x.to(device)).sum().backward()
                    optimizer.step()
        """)
    assert _fused(source) == "bool(self.use_gpu)"


def test_the_availability_test_is_written_as_before() -> None:
    assert _fused(PARSER + 'device = "cuda" if torch.cuda.is_available() else "cpu"\n' + STEP) \
        == "torch.cuda.is_available()"
