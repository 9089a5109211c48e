"""The pins read without packaging (requirements._requirement's shape reader) must read exactly as packaging
reads them, and every other spelling must still reach packaging: a difference would move a project's torch floor."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from packaging.requirements import InvalidRequirement, Requirement

from gpulint.project import requirements
from gpulint.project.requirements import _requirement

LINES = [
    "torch", "torch>=2.0", "torch >= 2.7.1", "torch==2.*", "torch!=2.0.*", "torch>=2.1,<3", "torch >=1.8 , <2.0",
    "torch[opt]~=2.2.0", "torch[opt, dev] >= 2.0", "torch[]", "torch~=1.13", "Torch>1.13", "torch_geometric>=2.0",
    "torch-scatter==2.1.2", "torchvision<0.17", 'torch==2.0.1; sys_platform == "linux"',
    "torch>=2.7.1; sys_platform == \"linux\"", "torch;python_version>'3.8'", "torch>=2.0;python_version>='3.8'",
    'torch>=2.0 ; python_version >= "3.8" and sys_platform != "win32"', "torch>=2 ; os_name in 'posix nt'",
    "torch>=2 ; os_name not in 'nt'", 'torch ; platform_machine == "x86_64" or platform_system == "Linux"',
    # spellings the shape reader leaves to packaging
    "torch~=2", "torch>=2.*", "torch<=2.*", "torch===2.0.1", "torch>=2.0.1+cu118", "torch==2.0.1+cu118",
    "torch>=2.0.0a0", "torch>=2.0rc1", "torch>=v2.0", "torch (>=2.0)", "torch @ https://x.org/torch-2.0.whl",
    "torch>=2.0,", "torch>=2.0;", 'torch>=2.0; extra == "gpu"', 'torch>=2.0; "linux" == sys_platform',
    'torch>=2.0; (python_version > "3.8")', "torch>=2.0.post1", "torch=2.0", "torch 2.0", "-e .", "./local",
    "torch>=2.0 # a comment", "1torch>=2", "torch.>=2", "torch>>2", "",
]


def _packaging(line: str) -> object:
    """(name, clauses) as packaging reads the line, with the local-label retry `_requirement` makes."""
    text = line.strip()
    for attempt in (text, requirements._LOCAL_LABEL.sub(r"\1", text)):
        try:
            parsed = Requirement(attempt)
        except InvalidRequirement:
            continue
        return parsed.name, sorted((s.operator, s.version) for s in parsed.specifier)
    return None


@pytest.mark.parametrize("line", LINES)
def test_the_shape_reader_reads_as_packaging(line: str) -> None:
    pin = _requirement(line)
    assert (None if pin is None else (pin.name, sorted(set(pin.clauses)))) == _packaging(line)


def test_common_pins_do_not_import_packaging_requirements() -> None:
    """The point of the shape reader: a project whose pins all have common shapes never imports it (asked of a
    fresh interpreter, so that no other test's imports count)."""
    script = textwrap.dedent(f"""
        import sys
        from gpulint.project.requirements import _requirement
        for line in {LINES[:23]!r}:
            assert _requirement(line) is not None, line
        assert "packaging.requirements" not in sys.modules
        _requirement("torch @ https://x.org/torch-2.0.whl")
        assert "packaging.requirements" in sys.modules
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
