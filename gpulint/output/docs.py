"""Rule documentation as text: `gpulint rule CODE` and the README rule table."""

from __future__ import annotations

from typing import Optional, Sequence

from gpulint.rules.base import Rule

# The habits of the GPU-optimisation guide gpulint was built from, in its order: key (`Rule.habit`), title.
GUIDE_HABITS: tuple[tuple[str, str], ...] = (
    ("mixed-precision", "Train in mixed precision (autocast, a GradScaler for float16)"),
    ("data-loading", "Keep the GPU fed: loader workers, pinned memory, asynchronous copies"),
    ("fused-optimizers", "Use fused optimizers"),
    ("activation-checkpointing", "Trade compute for memory with activation checkpointing"),
    ("gpu-augmentation", "Move augmentations to the GPU (DALI, Kornia)"),
    ("fused-kernels", "Combine small operations into a single kernel (xFormers, fused attention)"),
)


def habit_title(key: str) -> str:
    return dict(GUIDE_HABITS).get(key, key)


def fix_label(rule: type[Rule]) -> str:
    if rule.fix_detail:
        return rule.fix_detail
    return rule.fix.value if rule.fix is not None else "none"


def rule_markdown(rule: type[Rule], site: Optional[str] = None) -> str:
    """The rule's documentation; it ends with a link to its page only when a docs site is named."""
    docs = rule.docs
    parts = [
        f"# {rule.name} ({rule.code})",
        "",
        f"Fix: {fix_label(rule)}" + (" · preview" if rule.preview else "")
        + (" · runs only when selected by its code" if rule.opt_in else "") + f" · applies to {rule.target.value}",
        *([f"Habit of the guide: {habit_title(rule.habit)}"] if rule.habit else []),
        "",
        "## What it does",
        docs.section("what"),
        "",
        "## Why is this bad?",
        docs.section("why"),
        "",
        *premises_markdown(rule),
        "## Example",
        "```python",
        docs.section("example"),
        "```",
        "",
        "Use instead:",
        "```python",
        docs.section("use_instead"),
        "```",
        "",
        "## Fix safety",
        docs.section("fix_safety"),
        *fix_cases_markdown(rule),
    ]
    if rule.options:
        parts += ["", "## Options", ""]
        parts += [f"- `{option.key}` (default `{option.show()}`): {option.help}" for option in rule.options]
    url = rule.url(site)
    if url is not None:
        parts += ["", f"Docs: {url}"]
    return "\n".join(parts)


def fix_cases_markdown(rule: type[Rule]) -> list[str]:
    """The cases of the rule's fix, each with the fixture the tests lint to check it."""
    if not rule.docs.fix_cases:
        return []
    lines = ["", "By case (each checked on its fixture by tests/rules/test_fix_safety.py):", ""]
    lines += [f"- {case.case}: **{case.gives_text}** (`{fixture_path(rule.code, case.fixture)}`)"
              for case in rule.docs.fix_cases]
    return lines


def fix_safety_table(rules: Sequence[type[Rule]]) -> str:
    """Every rule's fix cases as one table, in code order (docs/fix-safety.md)."""
    lines = ["| rule | case | gpulint gives | fixture |", "|---|---|---|---|"]
    for rule in sorted(rules, key=lambda r: r.code):
        lines += [f"| {rule.code} | {case.case} | {case.gives_text} | `{fixture_path(rule.code, case.fixture)}` |"
                  for case in rule.docs.fix_cases]
    return "\n".join(lines)


def fixture_path(code: str, fixture: str) -> str:
    return f"fixtures/rules/{code}/{fixture}"


def premises_markdown(rule: type[Rule]) -> list[str]:
    """The rule's premises as a section: what the project must show before the rule reports."""
    if not rule.docs.premises:
        return []
    lines = ["## Premises", "",
             "Reported only when the code shows evidence for each of these; where one cannot be decided the rule "
             "stays silent (`strictness = \"pedantic\"` reports it, naming the premise), and where one is refuted "
             "it always does:", ""]
    lines += [f"- **{premise.key}**: {premise.text}" for premise in rule.docs.premises]
    return lines + [""]


def habits_table(rules: Sequence[type[Rule]]) -> str:
    """Each habit of the guide, the rules that check it and their state; the README prints it."""
    rows = ["| habit of the guide | rules (state) |", "|---|---|"]
    for key, title in GUIDE_HABITS:
        found = [f"{r.code} {r.name} ({'preview' if r.preview else 'stable'})" for r in rules if r.habit == key]
        rows.append(f"| {title} | {', '.join(found) or 'none yet'} |")
    return "\n".join(rows)


def rules_table(rules: Sequence[type[Rule]]) -> str:
    """Markdown table of rules; the README's rule table is this, kept current by a test."""
    rows = ["| code | name | fix | status | summary | effect |", "|---|---|---|---|---|---|"]
    for rule in rules:
        status = ("preview" if rule.preview else "stable") + (", select by code" if rule.opt_in else "")
        rows.append(f"| {rule.code} | {rule.name} | {fix_label(rule)} | {status} | {rule.summary} | {rule.impact} |")
    return "\n".join(rows)
