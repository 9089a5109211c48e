"""Issue 24: the instruments of a checked run, in this process (torch, fast): the one-ulp nudge, the exception
counter, the float16 range probe and the global-generator probe."""

from __future__ import annotations

import random
from typing import Any

import pytest

from gpulint.verify import instruments

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch


def test_the_nudge_moves_every_non_zero_element_one_ulp_and_leaves_the_scripts_generator_alone() -> None:
    param = torch.nn.Parameter(torch.tensor([1.0, -3.0, 0.0, 1e-30, 2.5]))
    before = param.detach().clone()
    state = torch.random.get_rng_state()
    assert instruments.nudge(torch, [param], seed=1, first_index=0) == 1
    assert torch.equal(torch.random.get_rng_state(), state)  # the script's random stream is untouched
    after = param.detach()
    assert after[2] == 0.0  # a zero stays zero
    for old, new in zip(before.tolist(), after.tolist()):
        if old != 0.0:
            assert new != old and abs(new - old) == abs(torch.nextafter(torch.tensor(old), torch.tensor(new)) - old)
    coarse = torch.nn.Parameter(before.clone())
    instruments.nudge(torch, [coarse], seed=1, first_index=0, bits=7)  # one bfloat16 ulp: 2**-7 at 1.0
    assert abs(float(coarse.detach()[0]) - 1.0) == pytest.approx(2 ** -7)


def test_an_exception_the_users_code_swallows_counts_and_one_passing_through_to_torch_does_not() -> None:
    """torch's non-reentrant checkpoint stops a recomputation with an exception that crosses the user's forward."""
    from torch.utils.checkpoint import checkpoint

    seen: list[tuple[Any, ...]] = []
    counter = instruments.ExceptionCounter(lambda f: f if f == __file__ else None,
                                           lambda kind, exc, tb, frame, line: seen.append((kind.__name__, line)))
    layer = torch.nn.Linear(4, 4)

    def block(x: Any) -> Any:
        return torch.tanh(layer(x))

    def train() -> int:
        line = 0
        counter.start()
        x = torch.randn(2, 4, requires_grad=True)
        for _ in range(3):
            checkpoint(block, x, use_reentrant=False).sum().backward()
            try:
                line = train.__code__.co_firstlineno + 8  # the next line
                torch.zeros(2).index_add_(0, torch.tensor([0, 1]), torch.ones(2, dtype=torch.bfloat16))
            except:  # noqa: E722 - the habit under test
                pass
            counter.forget()
        counter.stop()
        return line

    line = train()
    assert seen == [("RuntimeError", line)] * 3


def test_the_range_probe_sees_float16_overflow_and_lost_epsilons_inside_autocast() -> None:
    probe = instruments.RangeProbe(torch, lambda: ("train.py", 7), lambda: 1)
    mode = instruments.make_range_probe(torch, probe)
    layer = torch.nn.Linear(4, 4)
    with torch.no_grad():
        layer.weight.fill_(1.0)
    with torch.autocast("cpu", dtype=torch.bfloat16), mode:
        out = layer(torch.full((2, 4), 30_000.0))  # 120,000: fits bfloat16, not float16
        torch.log(torch.sigmoid(out) + 1e-15)
    assert probe.max_abs > instruments.FLOAT16_MAX
    assert probe.overflows[0]["func"] == "linear" and probe.overflows[0]["where"] == "train.py:7"
    assert probe.epsilons and probe.epsilons[0]["value"] == pytest.approx(1e-15)
    calm = instruments.RangeProbe(torch, lambda: None, lambda: 1)
    with torch.autocast("cpu", dtype=torch.bfloat16), instruments.make_range_probe(torch, calm):
        layer(torch.ones(2, 4)) + 1e-3
    assert not calm.overflows and not calm.epsilons and calm.ops >= 1


def test_a_dataset_drawing_from_the_global_generator_is_seen() -> None:
    from torch.utils.data import DataLoader, Dataset

    class Noisy(Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> Any:
            return torch.randn(2) + random.random()

    class Fixed(Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> Any:
            return torch.randn(2, generator=torch.Generator().manual_seed(index))

    from torch.utils.data._utils import fetch

    original = fetch._MapDatasetFetcher.fetch
    for dataset, expected in ((Noisy(), {"torch": "Noisy", "random": "Noisy"}), (Fixed(), {})):
        probe = instruments.GlobalRngProbe(torch)
        fetch._MapDatasetFetcher.fetch = probe.wrap(original, lambda: True)  # type: ignore[method-assign]
        try:
            list(DataLoader(dataset, batch_size=4))
        finally:
            fetch._MapDatasetFetcher.fetch = original  # type: ignore[method-assign]
        assert probe.drawn == expected
