"""The second prefilter: on CPython's `ast` tree, which rules could really fire.

Every candidate file is parsed with `ast` anyway (engine/guard.py) at about a tenth of the
cost of LibCST. One walk over that tree collects what the rules' `ast_needles` ask about:

- the qualified names the file's dotted names may resolve to through ANY import binding it
  makes, at any scope (`import torch.optim as optim` + `optim.Adam` -> `torch.optim.Adam`),
  plus every import target itself;
- the names of attributes that are called (`loss.backward()` -> `backward`).

Scopes, shadowing and rebinding are ignored on purpose: the alias table LibCST's rules use
(core/names.py) resolves a name only through an import binding and only when every
binding agrees, so the set collected here is a superset of what it can resolve. When a name
might resolve, the file goes through; only a file where no needle group of a rule can be
met is kept from LibCST for that rule.

Needle syntax (see `Rule.ast_needles`): a tuple of groups, every group must match; a group
matches when any of its needles does:

- `"torch.optim.Adam"`: some qualified name starts with it;
- `"torch.nn.*Sequential"`: some qualified name starts with the part before `*` and ends
  with the part after it;
- `".step("`: some call's callee is an attribute named `step`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Mapping, Optional, Sequence, TypeVar

from gpulint.project.ast_nodes import fast_walk, kept_nodes
from gpulint.records import dataclass

if TYPE_CHECKING:
    from gpulint.project.view import ProjectView
    from gpulint.rules.base import Rule

# Module-level switch for the prefilters after the text check (this one, and the project facts'
# `Rule.may_report` in engine/linter.py): the correctness tests compare findings with and without them.
ENABLED = True

AstNeedles = tuple[tuple[str, ...], ...]
RuleT = TypeVar("RuleT", bound="type[Rule]")


@dataclass(frozen=True)
class AstFacts:
    """What one file's tree offers to the rules' needles."""

    qualified: frozenset[str]  # every qualified name a dotted name may resolve to, prefixes included
    called_attributes: frozenset[str]  # `x.<name>(...)`

    def has(self, needle: str) -> bool:
        if needle.startswith(".") and needle.endswith("("):
            return needle[1:-1] in self.called_attributes
        if "*" in needle:
            head, tail = needle.split("*", 1)
            return any(q.startswith(head) and q.endswith(tail) and len(q) >= len(head) + len(tail)
                       for q in self.qualified)
        return any(q.startswith(needle) for q in self.qualified)

    def meets(self, needles: Optional[AstNeedles]) -> bool:
        """Every group has a needle that matches (no needles: always)."""
        if needles is None:
            return True
        return all(any(self.has(needle) for needle in group) for group in needles)


def _dotted(node: ast.expr) -> Optional[list[str]]:
    """`a.b.c` as ["a", "b", "c"] for an attribute chain over a name, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    parts.reverse()
    return parts


def scan(tree: ast.AST, star: Optional[Mapping[str, str]] = None) -> AstFacts:
    """One walk: import bindings, attribute chains over names, called attribute names. `star`: what the
    file's `from project_module import *` bind (ProjectView.star_modules), for names no import here binds."""
    bound: dict[str, set[str]] = {}  # name -> import targets it is bound to somewhere
    chains: list[list[str]] = []
    called: set[str] = set()
    targets: set[str] = set()
    Attribute, Call, Import, ImportFrom = ast.Attribute, ast.Call, ast.Import, ast.ImportFrom
    kept = kept_nodes(tree)  # the project pass's list, when it made one, is cheaper to read than a new walk
    for node in fast_walk(tree) if kept is None else kept:  # the order does not matter: everything lands in sets
        kind = type(node)
        if kind is Attribute:
            parts = _dotted(node)  # type: ignore[arg-type]
            if parts is not None:
                chains.append(parts)
        elif kind is Call:
            func = node.func  # type: ignore[attr-defined]
            if type(func) is Attribute:
                called.add(func.attr)
        elif kind is Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname:
                    _bind(bound, targets, alias.asname, alias.name)
                else:
                    top = alias.name.split(".", 1)[0]
                    _bind(bound, targets, top, top)
                    targets.add(alias.name)
        elif kind is ImportFrom:
            module = node.module  # type: ignore[attr-defined]
            if node.level or not module:  # type: ignore[attr-defined]
                continue  # relative: never resolved to a qualified name
            targets.add(module)
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.name == "*":
                    continue
                _bind(bound, targets, alias.asname or alias.name, f"{module}.{alias.name}")
    for name, target in (star or {}).items():
        if name not in bound:
            _bind(bound, targets, name, target)
    qualified = set(targets)
    for parts in chains:
        roots = bound.get(parts[0])
        if roots:
            rest = ".".join(parts[1:])
            qualified.update(f"{root}.{rest}" for root in roots)
    return AstFacts(frozenset(qualified), frozenset(called))


def _bind(bound: dict[str, set[str]], targets: set[str], name: str, target: str) -> None:
    bound.setdefault(name, set()).add(target)
    targets.add(target)


def text_may_meet(needles: Optional[AstNeedles], text: str) -> bool:
    """Co-occurrence on the raw text, implied by the needles: every group's last word must be there.

    Every segment of a qualified name the alias table resolves is spelled in the file (in an
    import or an attribute chain), and so is a called attribute, so this never rejects a file
    a rule could flag. Cheaper than the walk, which it spares when no rule is left.
    """
    if needles is None:
        return True
    return all(any(_last_word(needle) in text for needle in group) for group in needles)


def _last_word(needle: str) -> str:
    if needle.startswith(".") and needle.endswith("("):
        return needle[1:-1]
    return needle.rsplit("*", 1)[-1].rsplit(".", 1)[-1]


def narrow(text: str, tree: ast.AST, rules: Sequence[RuleT], star: Optional[Mapping[str, str]] = None,
           project: Optional[ProjectView] = None) -> list[RuleT]:
    """The rules that could fire on this file: co-occurrence on the text, then the tree (or the project facts,
    where a rule's needles are met through another module: `Rule.needles_elsewhere`)."""
    if not ENABLED:
        return list(rules)
    kept = [r for r in rules if text_may_meet(r.ast_needles, text)]
    if all(r.ast_needles is None for r in kept):
        return kept
    facts = scan(tree, star)
    return [r for r in kept if facts.meets(r.ast_needles) or r.needles_elsewhere(project)]

