"""analysis/loaders.py's UNATTENDED premise on small sources (blind10: pytorch-retinanet's visualize.py): which loop
bodies wait for a person on every batch, and which loaders only such loops iterate."""

from __future__ import annotations

import ast
import textwrap

import pytest

from gpulint.analysis.ast_context import AstContext
from gpulint.analysis.loaders import paced_by_a_person, waits_for_a_person
from tests.analysis.contexts import ast_context

IMPORTS = "import cv2\nimport matplotlib.pyplot as plt\nfrom torch.utils.data import DataLoader\n"


def context(source: str, path: str = "view.py") -> AstContext:
    return ast_context(IMPORTS + textwrap.dedent(source), path)


def first_loop_waits(source: str, path: str = "view.py") -> bool:
    ctx = context(source, path)
    loop = next(n for n in ctx.nodes(ast.For) if isinstance(n, ast.For))
    return waits_for_a_person(ctx, loop)


@pytest.mark.parametrize("body", [
    "cv2.waitKey(0)",
    "cv2.waitKey()",
    "cv2.waitKey(delay=0)",
    "cv2.waitKey(-1)",
    "key = cv2.waitKeyEx(0)",
    "input('next? ')",
    "plt.show()",
    "plt.show(block=True)",
    "plt.waitforbuttonpress()",
    "plt.waitforbuttonpress(-1)",
    "with torch.no_grad():\n    cv2.waitKey(0)",
    "if cv2.waitKey(0) & 0xFF == ord('q'):\n    break",
    "if big:\n    cv2.waitKey(0)\nelse:\n    input()",
    "try:\n    cv2.waitKey(0)\nexcept KeyboardInterrupt:\n    break",
    "if x is None:\n    break\ncv2.waitKey(0)",
    "cv2.waitKey(0)\nif skip:\n    continue",
])
def test_a_body_that_waits_on_every_pass(body: str) -> None:
    assert first_loop_waits("for batch in loader:\n" + textwrap.indent(body, "    ") + "\n")


@pytest.mark.parametrize("body", [
    "cv2.waitKey(1)",  # a frame pump: returns after a millisecond
    "cv2.waitKey(args.delay)",
    "cv2.waitKey(*delays)",
    "plt.pause(0.5)",  # returns on a timer
    "plt.show(block=False)",
    "plt.waitforbuttonpress(timeout=5)",
    "if debug:\n    cv2.waitKey(0)",
    "if skip:\n    continue\ncv2.waitKey(0)",
    "for box in boxes:\n    cv2.waitKey(0)",
    "show and cv2.waitKey(0)",
    "key = cv2.waitKey(0) if debug else -1",
    "wait = lambda: cv2.waitKey(0)",
    "keys = [cv2.waitKey(0) for _ in boxes]",
])
def test_a_body_that_may_not_wait(body: str) -> None:
    assert not first_loop_waits("for batch in loader:\n" + textwrap.indent(body, "    ") + "\n")


@pytest.mark.parametrize(("imports", "call", "waits"), [
    ("import cv2 as cv", "cv.waitKey(0)", True),
    ("from cv2 import waitKey", "waitKey(0)", True),
    ("from matplotlib import pyplot as pl", "pl.show()", True),
    ("import matplotlib.pyplot", "matplotlib.pyplot.show()", True),
    ("from matplotlib import pyplot as pl\npl.ion()", "pl.show()", False),  # interactive: show returns
    ("import matplotlib\nmatplotlib.use('Agg')", "plt.show()", False),  # a backend that draws to no window
    ("def input(prompt):\n    return 'q'", "input('next')", False),  # the file's own `input`, not the builtin
    ("from mytools import cv2", "cv2.waitKey(0)", False),
])
def test_names_are_resolved_through_the_imports(imports: str, call: str, waits: bool) -> None:
    assert first_loop_waits(f"{imports}\nfor batch in loader:\n    {call}\n") is waits


def test_plt_show_does_not_block_in_a_notebook() -> None:
    assert not first_loop_waits("for batch in loader:\n    plt.show()\n", path="view.ipynb")


@pytest.mark.parametrize(("helpers", "waits"), [
    ("def show(x):\n    cv2.imshow('x', x)\n    cv2.waitKey(0)\n", True),
    ("def show(x):\n    step(x)\ndef step(x):\n    return input()\n", True),  # two levels
    ("def show(x):\n    a(x)\ndef a(x):\n    b(x)\ndef b(x):\n    input()\n", False),  # three: not read
    ("def show(x):\n    if x is None:\n        return\n    cv2.waitKey(0)\n", False),  # may return first
    ("def show(x):\n    cv2.waitKey(0)\n    yield x\n", False),  # a generator: calling it runs nothing
    ("def show(x):\n    show(x)\n", False),
])
def test_functions_of_the_file_the_body_calls(helpers: str, waits: bool) -> None:
    assert first_loop_waits(f"{helpers}for batch in loader:\n    show(batch)\n") is waits


def test_a_method_the_body_calls_on_self() -> None:
    assert first_loop_waits("""\
        class Viewer:
            def pause(self):
                input("next")

            def run(self, loader):
                for batch in loader:
                    self.pause()
        """)


VIEWER = """\
def view(loader):
    for batch in loader:
        cv2.imshow("batch", batch.numpy())
        cv2.waitKey(0)

def main(dataset):
    loader = DataLoader(dataset, batch_size=1)
    print(len(loader))
    {uses}
"""


@pytest.mark.parametrize(("uses", "paced"), [
    ("for i, batch in enumerate(loader):\n        input()", True),
    ("view(loader)", True),  # handed to a function of the file whose loop waits
    ("for batch in loader:\n        cv2.waitKey(1)", False),
    ("view(loader)\n    for batch in loader:\n        train(batch)", False),  # also a training loop
    ("view(loader)\n    trainer.fit(loader)", False),  # handed to code gpulint does not read
    ("view(loader)\n    return loader", False),
])
def test_a_loader_is_paced_only_when_every_loop_over_it_waits(uses: str, paced: bool) -> None:
    ctx = context(VIEWER.format(uses=uses))
    loader = next(c for c in ctx.nodes(ast.Call) if isinstance(c, ast.Call) and ctx.segment(c.func) == "DataLoader")
    assert paced_by_a_person(ctx, loader) is paced
