"""The project facts' JSON is derived from their declarations: every fact survives the cache."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from gpulint.project.codec import decode, decode_fields, encode, encode_fields
from gpulint.project.facts import FileFacts, facts_of_text

ROOT = Path(__file__).resolve().parent.parent.parent
SOURCES = sorted(p for folder in ("fixtures", "examples") for p in (ROOT / folder).rglob("*.py"))


def test_the_facts_of_every_fixture_survive_a_json_round_trip() -> None:
    checked = 0
    for path in SOURCES:
        facts = facts_of_text(path.read_text(encoding="utf-8"))
        if facts is None:
            continue
        assert FileFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts, path
        checked += 1
    assert checked > 300


def test_non_default_values_of_every_field_survive() -> None:
    """The fixtures may leave a field at its default; this sets each one to something else."""
    from gpulint.project.facts import ClassFacts, ImportRef
    from gpulint.project.layers import Layer

    facts = FileFacts(
        imports=(ImportRef("nn", "torch", 0, "nn"), ImportRef("m", "pkg.m", 2, None)), gpu=True, scaler=True,
        mixed_precision=("bf16",), argparse_defaults={"lr": 0.1, "name": "x", "n": 3, "none": None},
        bool_flags=("cuda", "fp16"),
        dataclass_ints={"n_layers": {"Config": 12}},
        classes={"Net": ClassFacts(("torch.nn.Module",), module=True, layers=(Layer("dims", "Linear", ("64", "128"),
                                                                                    (("bias", "False"),)),),
                                   init_params=("width",), init_defaults=(("width", 64),))},
        refs={"f": ("g",)}, optimizers={"OPT": ("torch.optim.Adam",)}, config_ints={"n_layer": (6, 12)}, step_rows=7,
        option_values={"flash": ("off", "on")}, class_calls={"Attn": -1, "Cfg": 2},
        option_defaults={"use_flash_attn": {"Cfg": False}})
    assert FileFacts.from_json(json.loads(json.dumps(facts.to_json()))) == facts


@dataclass(frozen=True)
class _Declared:
    flags: frozenset[str] = frozenset()
    pairs: tuple[tuple[str, int], ...] = ()
    maybe: Optional[int] = None
    table: dict[str, tuple[str, ...]] = field(default_factory=dict)


def test_a_new_declared_fact_needs_no_hand_written_json() -> None:
    value = _Declared(frozenset({"b", "a"}), (("x", 1),), 5, {"k": ("v",)})
    data = json.loads(json.dumps(encode_fields(value)))
    assert data == {"flags": ["a", "b"], "pairs": [["x", 1]], "maybe": 5, "table": {"k": ["v"]}}
    assert decode_fields(_Declared, data) == value
    assert decode_fields(_Declared, {}) == _Declared()  # a field an older entry lacks keeps its default


def test_what_the_declarations_do_not_describe_is_refused() -> None:
    with pytest.raises(TypeError):
        encode(object())
    with pytest.raises(TypeError):
        decode(int, "3")
