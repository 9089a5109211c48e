"""gpulint/records.py: a class made a dataclass when first used behaves as one made at once."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from dataclasses import field
from typing import Any, Callable

import gpulint.records
from gpulint.records import _dataclass as deferred


def _classes(make: Callable[..., Any]) -> dict[str, Any]:
    @make(frozen=True)
    class Frozen:
        x: int
        y: tuple = field(default_factory=tuple)
        z: str = field(default="q", repr=False, compare=False)

    @make(frozen=True)
    class Derived(Frozen):
        w: int = 5

    @make
    class Plain:
        a: int = 0

    @make(eq=False)
    class ByIdentity:
        a: int = 0

    @make
    class PostInit:
        """A docstring."""

        a: int

        def __post_init__(self) -> None:
            self.b = self.a * 2

    class Subclass(Frozen):
        pass

    @make(frozen=True)
    class OwnEq:
        a: int

        def __eq__(self, other: object) -> bool:
            return True

    @make(frozen=True, order=True)
    class Ordered:
        a: int

    return dict(locals())


def _behaviour(c: dict[str, Any]) -> list[Any]:
    out: list[Any] = [[f.name for f in dataclasses.fields(c["Derived"])], dataclasses.is_dataclass(c["Subclass"])]
    a, b = c["Frozen"](1), c["Derived"](1, (2,), "r", 7)
    out += [repr(a), repr(b), a == c["Frozen"](1), a == c["Frozen"](1, (), "other"), hash(a) == hash(c["Frozen"](1)),
            b == c["Derived"](1, (2,), "s", 7), a == b]
    for attempt in (lambda: setattr(a, "x", 3), lambda: delattr(a, "x"), lambda: hash(c["Plain"]())):
        try:
            attempt()
        except Exception as exc:  # noqa: BLE001 - the error itself is compared
            out.append(f"{type(exc).__name__}: {exc}")
    out += [c["Plain"](1) == c["Plain"](1), c["ByIdentity"](1) == c["ByIdentity"](1), repr(c["ByIdentity"](2)),
            c["PostInit"](3).b, repr(c["PostInit"](3)), c["PostInit"].__doc__, c["Frozen"].__doc__,
            c["Derived"].__doc__, c["Plain"].__doc__, repr(c["Subclass"](4)), c["Subclass"](4) == c["Subclass"](4),
            c["OwnEq"](1) == c["OwnEq"](2), c["OwnEq"].__hash__ is None, c["Ordered"](1) < c["Ordered"](2),
            repr(dataclasses.replace(b, w=9)), dataclasses.asdict(b), c["Frozen"].__match_args__,
            sorted(k for k in vars(c["Frozen"]) if not k.startswith("__"))]
    return out


def test_deferred_classes_behave_as_dataclasses() -> None:
    assert _behaviour(_classes(deferred)) == _behaviour(_classes(dataclasses.dataclass))


def test_a_class_is_made_a_dataclass_when_first_used() -> None:
    c = _classes(deferred)
    pending = gpulint.records._PENDING
    assert c["Plain"] in pending and c["Frozen"] in pending and c["Ordered"] not in pending
    c["Plain"]()
    assert c["Plain"] not in pending and c["Frozen"] in pending
    dataclasses.fields(c["Derived"])  # its base is made first
    assert c["Frozen"] not in pending and c["Derived"] not in pending


def test_an_instance_unpickled_before_its_class_is_made() -> None:
    code = (
        "import pickle, sys\n"
        "import gpulint.records\n"
        "from gpulint.project.facts import ImportRef\n"
        "assert ImportRef in gpulint.records._PENDING\n"
        "ref = pickle.loads(sys.stdin.buffer.read())\n"
        "print(ref == ImportRef('cuda', 'torch', 0, 'cuda'), hash(ref) == hash(ImportRef('cuda', 'torch', 0, 'cuda')),"
        " repr(ref))\n"
    )
    from gpulint.project.facts import ImportRef

    ref = ImportRef("cuda", "torch", 0, "cuda")
    out = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(ref), capture_output=True, check=True)
    assert out.stdout.decode().strip() == f"True True {ref!r}"
