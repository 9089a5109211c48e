"""Generated code keeps to the project's line length, in the file's own way of breaking lines
(gpulint/core/layout.py, core/style.py, project/line_length.py)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from gpulint.config import SettingsResolver
from gpulint.core.layout import Frame, fit, long_lines, render, visible_length
from gpulint.core.rewrite import add_keyword
from gpulint.core.style import CodeStyle, detect
from gpulint.project.line_length import declared_line_length

HANGING = CodeStyle(width=88)
ALIGNED = CodeStyle(width=88, hanging=False)


def laid_out(code: str, prefix: str = "", suffix: str = "", style: CodeStyle = HANGING, indent: tuple = (),
             old: str = "") -> str:
    node = cst.parse_statement(code) if code.endswith("\n") else cst.parse_expression(code)
    nodes = fit([node], Frame(prefix, suffix, indent, "\n"), style, long_lines(old, style.width))
    return prefix + render(nodes, indent, style.unit, "\n").text + suffix


def test_a_call_is_split_after_its_bracket_then_one_argument_a_line() -> None:
    call = add_keyword(cst.parse_expression("DataLoader(dataset, batch_size=64, shuffle=True, num_workers=8)"),
                       "pin_memory", "True")
    node = fit([call], Frame("    loader = ", "", (), "\n"), HANGING, set())
    text = "    loader = " + render(node, (), "    ", "\n").text
    assert text.splitlines() == [
        "    loader = DataLoader(",
        "        dataset, batch_size=64, shuffle=True, num_workers=8, pin_memory=True",
        "    )"]
    longer = laid_out("DataLoader(training_dataset, batch_size=args.batch_size, shuffle=True, num_workers=8, "
                      "pin_memory=True)", "    train_loader = ")
    assert longer.splitlines() == [
        "    train_loader = DataLoader(",
        "        training_dataset,",
        "        batch_size=args.batch_size,",
        "        shuffle=True,",
        "        num_workers=8,",
        "        pin_memory=True,",
        "    )"]


def test_aligned_files_continue_under_the_bracket() -> None:
    assert laid_out("DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, pin_memory=True)",
                    "    dataloader = torch.utils.data.", style=ALIGNED) == (
        "    dataloader = torch.utils.data.DataLoader(dataset, batch_size=batch_size,\n"
        "                                             shuffle=True, num_workers=workers,\n"
        "                                             pin_memory=True)")


def test_a_call_already_spread_over_lines_breaks_where_it_already_breaks() -> None:
    pad = " " * 41
    call = add_keyword(cst.parse_expression(
        f"DataLoader(dataset, batch_size=opt.batchSize,\n{pad}shuffle=True, num_workers=int(opt.workers))"),
        "pin_memory", "True")
    node = fit([call], Frame("dataloader = torch.utils.data.", "", (), "\n"), ALIGNED, set())
    assert render(node, (), "    ", "\n").text.splitlines()[1:] == [
        f"{pad}shuffle=True, num_workers=int(opt.workers),",
        f"{pad}pin_memory=True)"]


def test_a_conditional_expression_is_parenthesised_one_part_a_line() -> None:
    code = ("amp_dtype = torch.float16 if device.type == 'cuda' and not "
            "torch.cuda.is_bf16_supported(including_emulation=False) else torch.bfloat16\n")
    assert laid_out(code, indent=("    ",)).splitlines() == [
        "    amp_dtype = (",
        "        torch.float16",
        "        if device.type == 'cuda'",
        "        and not torch.cuda.is_bf16_supported(including_emulation=False)",
        "        else torch.bfloat16",
        "    )"]


def test_a_comment_indented_past_the_limit_is_reflowed() -> None:
    code = ("with torch.autocast(device_type='cuda'):\n"
            "    # " + "word " * 17 + "end\n"
            "    loss = model(x)\n")
    lines = laid_out(code, indent=("    ",)).splitlines()
    assert lines[1] == "        # " + " ".join(["word"] * 15)
    assert lines[2] == "        # word word end"
    assert all(visible_length(line) <= 88 for line in lines)


def test_lines_that_were_long_before_are_left_alone() -> None:
    code = "x = call(" + ", ".join(f"argument_{i}" for i in range(12)) + ")\n"
    assert laid_out(code, old=code) == code


def test_what_cannot_be_broken_stays_and_the_rest_is_still_laid_out() -> None:
    code = ("with torch.autocast(device_type=torch.device(args.device_type).type, dtype=torch.bfloat16):\n"
            "    message = '" + "x" * 90 + "'\n")
    lines = laid_out(code).splitlines()
    assert lines[0] == "with torch.autocast("
    assert lines[-1].startswith("    message = '")  # a long string: nothing to break


def test_pragma_comments_and_tabs_count_as_ruff_counts_them() -> None:
    assert visible_length("x = 1  # noqa: E501") == 5
    assert visible_length("\tx = 1") == 9  # a tab is indent-width (4) columns


@pytest.mark.parametrize(("source", "quote", "hanging"), [
    ("x = 'a'\ny = 'b'\nz = \"c\"\n", "'", True),
    ("x = \"a\"\ny = 'b'\n", '"', True),  # a tie: double quotes
    ("f(a,\n  b)\n", '"', False),
    ("f(\n    a,\n)\n", '"', True),
    # a page break before the call does not move its bracket: still aligned (found when a new fixture moved the
    # byte-property test's variants; the style read differed from the one of the same file without form feeds)
    (" \fx = f(a,\n      b)\n", '"', False),
    ("\f\fx = f(a,\n      b)\n", '"', False),
])
def test_style_is_read_from_the_file(source: str, quote: str, hanging: bool) -> None:
    style = detect(source, 100, "    ")
    assert (style.quote, style.hanging, style.width) == (quote, hanging, 100)
    assert style.string("cuda") == f"{quote}cuda{quote}"


def test_line_length_comes_from_the_projects_formatter_settings(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "setup.cfg").write_text("[flake8]\nmax-line-length = 127\n")
    (tmp_path / "black").mkdir()
    (tmp_path / "black" / "pyproject.toml").write_text("[tool.black]\nline-length = 100\n")
    (tmp_path / "ruff").mkdir()
    (tmp_path / "ruff" / "pyproject.toml").write_text(
        "[tool.black]\nline-length = 100\n[tool.ruff]\nline-length = 110\n")
    (tmp_path / "ruff" / "own").mkdir()
    (tmp_path / "ruff" / "own" / "ruff.toml").write_text("line-length = 99\n")
    (tmp_path / "gpulint").mkdir()
    (tmp_path / "gpulint" / "pyproject.toml").write_text(
        "[tool.gpulint]\nline-length = 79\n[tool.ruff]\nline-length = 120\n")
    assert declared_line_length(str(tmp_path)) == (127, "setup.cfg [flake8] max-line-length")
    assert declared_line_length(str(tmp_path / "black")) == (100, "pyproject.toml [tool.black] line-length")
    assert declared_line_length(str(tmp_path / "ruff")) == (110, "pyproject.toml [tool.ruff] line-length")
    assert declared_line_length(str(tmp_path / "ruff" / "own")) == (99, "ruff.toml line-length")
    resolver = SettingsResolver()
    assert resolver.for_path(tmp_path / "gpulint" / "train.py").line_length == 79  # gpulint's own setting wins
    assert resolver.for_path(tmp_path / "ruff" / "train.py").line_length == 110
    assert SettingsResolver(isolated=True).for_path(tmp_path / "ruff" / "train.py").line_length == 88
    shown = resolver.describe(tmp_path / "ruff" / "train.py")
    assert "# line-length: 110, from pyproject.toml [tool.ruff] line-length" in shown and "line-length = 110" in shown
