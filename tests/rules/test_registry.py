"""The registry finds every rule by discovery, and each rule class carries all that is said about it.

Generic over the rules: a new rule passes or fails these without any test naming it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from gpulint.core.options import Option
from gpulint.core.settings import Settings
from gpulint.engine.linter import lint_text
from gpulint.output.docs import rule_markdown
from gpulint.rules import RULE_MODULE, all_options, all_rules, rule_codes, rule_modules
from gpulint.rules.base import Rule

PACKAGE = Path(__file__).resolve().parent.parent.parent / "gpulint"
RULES = all_rules()


def test_discovery_finds_one_rule_per_module_and_nothing_else() -> None:
    files = sorted(p.stem for p in (PACKAGE / "rules").glob("*.py") if p.stem not in ("__init__", "base"))
    assert files == sorted(m.module.rsplit(".", 1)[1] for m in rule_modules()), \
        "every module in gpulint/rules/ is a rule, named gpuNNN_<name>.py (helpers go to analysis/ or rewrites/)"
    assert [r.code for r in RULES] == [m.code for m in rule_modules()] == list(rule_codes())
    assert len(set(rule_codes())) == len(RULES) >= 10
    assert {r.__name__ for r in RULES} >= {"MissingAutocast", "DataLoaderPinMemory", "UnusedSuppression"}


def test_no_rule_class_lives_outside_the_rules_package() -> None:
    def subclasses(cls: type) -> list[type]:
        return [s for c in cls.__subclasses__() for s in [c, *subclasses(c)]]

    outside = [r for r in subclasses(Rule)
               if "code" in vars(r) and r not in RULES and r.__module__.startswith("gpulint")]
    assert outside == []


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_file_name_code_and_name_agree(rule: type[Rule]) -> None:
    match = RULE_MODULE.fullmatch(rule.__module__.rsplit(".", 1)[1])
    assert match is not None
    assert rule.code == f"GPU{match.group(1)}" and rule.name == match.group(2).replace("_", "-")
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name)


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_docs_are_complete_and_rendered(rule: type[Rule]) -> None:
    for field in ("what", "why", "example", "use_instead", "fix_safety"):
        assert rule.docs.section(field).strip(), f"{rule.code} has no {field}"
    assert rule.summary and "\n" not in rule.summary
    text = rule_markdown(rule)
    assert f"# {rule.name} ({rule.code})" in text
    assert rule.docs.section("example") in text and rule.docs.section("use_instead") in text
    for option in rule.options:
        assert f"`{option.key}`" in text and option.help in text


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_the_documented_example_is_flagged_and_its_fix_is_clean(rule: type[Rule]) -> None:
    """`example` shows code the rule reports, `use_instead` code it leaves alone."""
    settings = Settings(select=("ALL",), extend_select=(rule.code,), preview=True)  # opt-in rules too
    example = lint_text(Path("train.py"), rule.docs.section("example") + "\n", settings).findings
    assert rule.code in {f.code for f in example}, f"{rule.code}'s documented example is not flagged"
    better = lint_text(Path("train.py"), rule.docs.section("use_instead") + "\n", settings).findings
    assert rule.code not in {f.code for f in better}, f"{rule.code}'s `use_instead` is still flagged"


@pytest.mark.parametrize("rule", RULES, ids=[r.code for r in RULES])
def test_a_rule_with_a_fix_says_how_safe_it_is_and_what_verify_checks(rule: type[Rule]) -> None:
    if rule.fix is None:
        assert rule.verification is None
        return
    assert rule.verification is not None and rule.verification.evidence
    assert "safe" in rule.docs.section("fix_safety").lower()


@pytest.mark.parametrize("option", all_options(), ids=lambda o: o.key)
def test_every_option_is_typed_documented_and_travels_as_data(option: Option[object]) -> None:
    assert re.fullmatch(r"[a-z]+(-[a-z]+)*", option.key) and option.help
    if option.default is not None:
        assert option.read(option.kind.show(option.default) if option.key.startswith("max-") else option.default) \
            == option.default
    assert Option.from_json(option.to_json()) == option


def test_option_keys_are_unique() -> None:
    keys = [o.key for o in all_options()]
    assert len(keys) == len(set(keys))


def _string_constants(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    declared = set()
    for node in ast.walk(tree):  # the one place a code is written: `code = "GPU101"` in its rule class
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["code"]:
            declared.add(id(node.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in declared]


def test_code_names_rules_through_their_class_not_a_string() -> None:
    """A rule's code appears as a string only in its own class: everything else uses `Rule.code`."""
    found = [f"{path.relative_to(PACKAGE.parent)}:{line}: {value!r}"
             for path in sorted(PACKAGE.rglob("*.py")) for line, value in _string_constants(path)
             if re.fullmatch(r"GPU\d{3}", value)]
    assert found == []


def test_every_rule_names_a_habit_of_the_guide() -> None:
    """The README's habits table and each rule page read `Rule.habit`: a key the guide's table knows."""
    from gpulint.output.docs import GUIDE_HABITS

    keys = {key for key, _ in GUIDE_HABITS}
    unknown = [f"{r.code}: {r.habit!r}" for r in RULES if r.habit and r.habit not in keys]
    assert unknown == []
    assert {key for key, _ in GUIDE_HABITS} <= {r.habit for r in RULES}, "a habit no rule checks"
