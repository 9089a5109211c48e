"""Layer widths read from a model class (project/layers.py) and evaluated (analysis/model_widths.py): the layers a
loop builds over the consecutive pairs of a list (blind10: benedekrozemberczki/ClusterGCN's StackedGCN over
`[features] + args.layers + [classes]`), and the list-valued options they are bounded by."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Optional, Union

import pytest

from gpulint.analysis.model_widths import chain_width, layers_width
from gpulint.project.facts import ClassFacts, facts_of_text
from gpulint.project.layers import DIMS, PAIR_FIRST, PAIR_SECOND, Layer
from tests.analysis.test_project import findings, write

Value = Union[int, tuple[int, ...], None]


def model(body: str, params: str = "args, n_in, n_out") -> ClassFacts:
    """The facts of `class Net(nn.Module)` whose `__init__(self, <params>)` runs `body` after `super().__init__()`."""
    text = "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n" \
           f"    def __init__(self, {params}):\n        super().__init__()\n" + textwrap.indent(
               textwrap.dedent(body), " " * 8)
    facts = facts_of_text(text)
    assert facts is not None
    return facts.classes["Net"]


def width(found: ClassFacts, options: Optional[dict[str, Value]] = None, **bound: Optional[int]) -> Optional[int]:
    assert found.layers is not None
    return layers_width(found.layers, lambda _: None, bound, (options or {}).get)


def chains(found: ClassFacts) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    return [(layer.dims, layer.chain) for layer in found.layers or () if layer.chain]


PAIRS = (PAIR_FIRST, PAIR_SECOND)
OPTION_CHAIN = ("=n_in", "[@layers", "=n_out")


@pytest.mark.parametrize("body", [
    # StackedGCN's form: the list kept in the options themselves, indexed pair by pair
    """\
    self.args = args
    self.args.layers = [n_in] + self.args.layers + [n_out]
    for i, _ in enumerate(self.args.layers[:-1]):
        self.blocks.append(nn.Linear(self.args.layers[i], self.args.layers[i + 1]))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for i in range(len(dims) - 1):
        self.blocks.append(nn.Linear(dims[i], dims[i + 1]))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for i in range(1, len(dims)):
        self.blocks.append(nn.Linear(dims[i - 1], dims[i]))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for a, b in zip(dims[:-1], dims[1:]):
        self.blocks.append(nn.Linear(a, b))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for a, b in zip(dims, dims[1:]):
        self.blocks.append(nn.Linear(a, b))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for i, size in enumerate(dims[:-1]):
        self.blocks.append(nn.Linear(size, dims[i + 1]))
    """,
], ids=["enumerate-in-options", "range", "range-from-one", "zip-sliced", "zip", "enumerate-element"])
def test_a_loop_over_consecutive_pairs_is_read_as_a_chain(body: str) -> None:
    found = model(body)
    assert chains(found) == [(PAIRS, OPTION_CHAIN)]
    # every pair holds an entry of the option: no wider than its largest entry, whatever n_in and n_out are
    assert width(found, {"layers": (16, 16, 16)}) == 16
    assert width(found, {"layers": (16, 16, 16)}, n_in=4096, n_out=4096) == 16
    assert width(found, {"layers": (256, 256)}) == 256
    assert width(found, {"layers": (16,)}, n_in=8, n_out=4) == 8  # the pairs (8, 16) and (16, 4)


def test_what_bounds_a_chain_and_what_does_not() -> None:
    found = model("""\
    dims = [n_in] + args.layers + [n_out]
    for i in range(len(dims) - 1):
        self.blocks.append(nn.Linear(dims[i], dims[i + 1]))
    """)
    assert width(found) is None  # the option unknown: its length decides the pairs
    assert width(found, {"layers": 16}) is None  # an integer option is not a list
    assert width(found, {"layers": ()}) is None  # empty: (n_in, n_out), neither known
    assert width(found, {"layers": ()}, n_in=64) == 64
    assert width(found, {"layers": (16, 16)}, n_in=None, n_out=None) == 16


def test_a_chain_of_literals_and_a_kernel_factor() -> None:
    found = model("""\
    channels = [3, 32, 64]
    for i in range(len(channels) - 1):
        self.blocks.append(nn.Conv2d(channels[i], channels[i + 1], 3))
    """)
    assert width(found) == width(model("self.conv = nn.Conv2d(32, 64, 3)\n")) != 32  # the widest pair, as written
    short = model("""\
    channels = [3]
    for i in range(len(channels) - 1):
        self.blocks.append(nn.Linear(channels[i], channels[i + 1]))
    """)
    assert width(short) == 0  # one entry, no pair: the loop builds nothing


@pytest.mark.parametrize("body", [
    # the loop's index is bound again in its body
    """\
    dims = [n_in] + args.layers + [n_out]
    for i in range(len(dims) - 1):
        i = i * 2
        self.blocks.append(nn.Linear(dims[i], dims[i + 1]))
    """,
    # the list changes between its assignment and the loop, or in the loop
    """\
    dims = [n_in] + args.layers + [n_out]
    dims.append(4096)
    for i in range(len(dims) - 1):
        self.blocks.append(nn.Linear(dims[i], dims[i + 1]))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for i in range(len(dims) - 1):
        dims[i + 1] = dims[i + 1] * 64
        self.blocks.append(nn.Linear(dims[i], dims[i + 1]))
    """,
    # a helper of the class runs between: it may rewrite the list
    """\
    self.args = args
    self.args.layers = [n_in] + self.args.layers + [n_out]
    self.widen()
    for i, _ in enumerate(self.args.layers[:-1]):
        self.blocks.append(nn.Linear(self.args.layers[i], self.args.layers[i + 1]))
    """,
    # a list the function computes, and a list parameter
    """\
    dims = list(args.layers)
    for i in range(len(dims) - 1):
        self.blocks.append(nn.Linear(dims[i], dims[i + 1]))
    """,
    """\
    dims = [n_in] + args.layers + [n_out]
    for i in range(len(dims) - 2):
        self.blocks.append(nn.Linear(dims[i], dims[i + 2]))
    """,
    # not consecutive pairs: every entry with the last
    """\
    dims = [n_in] + args.layers + [n_out]
    for i in range(len(dims) - 1):
        self.blocks.append(nn.Linear(dims[i], dims[-1]))
    """,
    # a running width: not a pair loop
    """\
    last = n_in
    for size in args.layers:
        self.blocks.append(nn.Linear(last, size))
        last = size
    """,
], ids=["index-rebound", "appended-before", "stored-in-loop", "helper-between", "computed-list", "skips-one",
        "with-the-last", "running-width"])
def test_loops_not_understood_stay_unknown(body: str) -> None:
    found = model(body)
    assert width(found, {"layers": (16, 16, 16)}) is None


def test_an_option_list_the_class_assigns_elsewhere_is_not_the_option() -> None:
    found = model("""\
    self.args = args
    for i in range(len(self.args.layers) - 1):
        self.blocks.append(nn.Linear(self.args.layers[i], self.args.layers[i + 1]))
    """)
    assert width(found, {"layers": (16, 16, 16)}) == 16
    widened = facts_of_text(textwrap.dedent("""\
        from torch import nn


        class Net(nn.Module):
            def __init__(self, args):
                super().__init__()
                self.args = args
                for i in range(len(self.args.layers) - 1):
                    self.blocks.append(nn.Linear(self.args.layers[i], self.args.layers[i + 1]))

            def widen(self):
                self.args.layers = [4096, 4096]
        """))
    assert widened is not None
    assert width(widened.classes["Net"], {"layers": (16, 16, 16)}) is None


def test_a_container_given_the_layers_as_a_splat() -> None:
    """`self.layers = ListModule(*self.layers)`: the list holds only layers the class builds, read where they are
    built; a list that may hold a module handed in keeps the container unknown."""
    text = textwrap.dedent("""\
        from torch import nn


        class ListModule(nn.Module):
            def __init__(self, *modules):
                super().__init__()
                for index, module in enumerate(modules):
                    self.add_module(str(index), module)


        class Built(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = []
                self.layers.append(nn.Linear(16, 16))
                self.layers = ListModule(*self.layers)


        class Handed(nn.Module):
            def __init__(self, encoder):
                super().__init__()
                self.layers = [nn.Linear(16, 16)]
                self.layers.append(encoder)
                self.layers = ListModule(*self.layers)
        """)
    facts = facts_of_text(text)
    assert facts is not None
    built, handed = facts.classes["Built"].layers, facts.classes["Handed"].layers
    assert built is not None and handed is not None
    assert [layer.kind for layer in built] == [DIMS, "module"] and built[1].dims == ("...",)
    assert [layer.kind for layer in handed] == [DIMS, "opaque"]

    def lookup(name: str) -> Optional[ClassFacts]:
        return facts.classes.get(name)

    assert layers_width(built, lookup, {}, lambda _: None) == 16
    assert layers_width(handed, lookup, {}, lambda _: None) is None


def test_a_splat_leaves_the_parameters_from_there_unknown() -> None:
    """A class with a default width given a splat: the default is not taken, the splat may override it."""
    text = textwrap.dedent("""\
        from torch import nn


        class Block(nn.Module):
            def __init__(self, *parts, hidden=16):
                super().__init__()
                self.fc = nn.Linear(hidden, hidden)


        class Wide(nn.Module):
            def __init__(self, size=16):
                super().__init__()
                self.fc = nn.Linear(size, size)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.sizes = [nn.Linear(8, 8)]
                self.block = Block(*self.sizes)
                self.wide = Wide(*self.sizes)
        """)
    facts = facts_of_text(text)
    assert facts is not None
    layers = facts.classes["Net"].layers
    assert layers is not None
    assert layers_width(layers, facts.classes.get, {}, lambda _: None) is None  # Wide's `size` is unknown


def test_chain_width_evaluates_each_pair() -> None:
    layer = Layer(DIMS, "Linear", PAIRS, chain=("32", "[@layers", "=n_out"))
    assert chain_width(layer, lambda _: None, {"n_out": 4096}, {"layers": (8, 64)}.get) == 64
    unknown: dict[str, Value] = {}
    assert chain_width(layer, lambda _: None, {"n_out": 4096}, unknown.get) is None


@pytest.mark.parametrize("declared, expected", [
    ('parser.add_argument("--layers", nargs="+", type=int, default=[16, 16, 16])', [16, 16, 16]),
    ('parser.set_defaults(layers=[16, 16, 16])', [16, 16, 16]),
    ('parser.add_argument("--layers", nargs="+", type=int, default=[16, 16])\nparser.set_defaults(layers=[64])', None),
    ('parser.add_argument("--layers", nargs="+", default=["a", 16])', None),
    # an option declared without `default=` takes the parser's, in either order (blind11: RexYing/diffpool)
    ('parser.add_argument("--layers", dest="layers", type=int)\nparser.set_defaults(layers=20)', 20),
    ('parser.set_defaults(layers=20)\nparser.add_argument("--layers", type=int)', 20),
    ('parser.add_argument("--layers", type=int)\nparser.add_argument("--layers", type=int, default=8)\n'
     'parser.set_defaults(layers=20)', None),
])
def test_list_defaults_of_options(declared: str, expected: Optional[Union[int, list[int]]]) -> None:
    facts = facts_of_text(f"import argparse\nparser = argparse.ArgumentParser()\n{declared}\n")
    assert facts is not None
    assert facts.argparse_defaults["layers"] == expected


PARSER = """\
import argparse


def parameter_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=200)
    parser.set_defaults(layers={layers})
    return parser.parse_args()
"""

LAYERS = """\
import torch
from torch_geometric.nn import GCNConv


class StackedGCN(torch.nn.Module):
    def __init__(self, args, input_channels, output_channels):
        super().__init__()
        self.args = args
        self.input_channels = input_channels
        self.output_channels = output_channels
        self.setup_layers()

    def setup_layers(self):
        self.layers = []
        self.args.layers = [self.input_channels] + self.args.layers + [self.output_channels]
        for i, _ in enumerate(self.args.layers[:-1]):
            self.layers.append(GCNConv(self.args.layers[i], self.args.layers[i + 1]))
        self.layers = ListModule(*self.layers)


class ListModule(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()
        for idx, module in enumerate(args):
            self.add_module(str(idx), module)
"""

TRAINER = """\
import torch
import torch.nn.functional as F

from layers import StackedGCN


class Trainer:
    def __init__(self, args, graph):
        self.args = args
        self.graph = graph
        self.device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.model = StackedGCN(self.args, graph.feature_count, graph.class_count)
        self.model = self.model.to(self.device)

    def train(self):
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=0.01, fused=True)
        for epoch in range(self.args.epochs):
            self.optimizer.zero_grad()
            loss = F.nll_loss(self.model(self.graph.edges, self.graph.features), self.graph.target)
            loss.backward()
            self.optimizer.step()
"""

MAIN = """\
from parser import parameter_parser
from trainer import Trainer

args = parameter_parser()
Trainer(args, graph).train()
"""


@pytest.mark.parametrize("layers, reported", [("[16, 16, 16]", False), ("[256, 256]", True)])
def test_the_width_of_a_stacked_model_whose_option_a_caller_parses(tmp_path: Path, layers: str,
                                                                   reported: bool) -> None:
    """ClusterGCN's layout: the trainer's module declares no option; main.py parses them with parser.py's
    parameter_parser (`set_defaults(layers=[16, 16, 16])`) and hands them to the trainer."""
    write(tmp_path, {"parser.py": PARSER.replace("{layers}", layers), "layers.py": LAYERS, "trainer.py": TRAINER,
                     "main.py": MAIN})
    found = findings(tmp_path, "--select", "GPU001,GPU401")
    assert (("trainer.py", 20, "GPU001") in found) is reported
    assert (("trainer.py", 21, "GPU401") in found) is reported


def test_options_around_that_disagree_are_unknown(tmp_path: Path) -> None:
    other = "import argparse\n\nfrom trainer import Trainer\n\nparser = argparse.ArgumentParser()\n" \
            "parser.add_argument('--layers', nargs='+', type=int, default=[512])\n"
    write(tmp_path, {"parser.py": PARSER.replace("{layers}", "[16, 16, 16]"), "layers.py": LAYERS,
                     "trainer.py": TRAINER, "main.py": MAIN, "other.py": other})
    found = findings(tmp_path, "--select", "GPU001")
    assert ("trainer.py", 20, "GPU001") in found


@pytest.mark.parametrize("body, bound, expected", [
    # one known narrow side: a probe to 5 classes over features of unknown width (blind11: SimCSE's SentEval)
    ("self.fc = nn.Linear(n_in, 5)", {}, 5),
    ("self.fc = nn.Linear(n_in, 512)", {}, 512),
    ("self.fc = nn.Linear(n_in, n_out)", {}, None),
    # a weight moved before it is wrapped has the factory's shape; a moved 1-D bias multiplies nothing
    # (blind11: RexYing/diffpool's GraphConv)
    ("self.w = nn.Parameter(torch.FloatTensor(n_in, n_out).cuda())\n"
     "self.b = nn.Parameter(torch.FloatTensor(n_out).cuda())", {"n_out": 20}, 20),
    # a recurrent layer is at least its hidden size wide; a narrow input bounds only its input matmul
    ("self.rnn = nn.LSTM(3, n_out)", {"n_out": 512}, 512),
    ("self.rnn = nn.LSTM(28, 64)", {}, 64),
    ("self.rnn = nn.GRU(n_in, 64)", {}, 192),
    ("self.rnn = nn.GRU(1024, 64)", {}, 192),
    ("self.rnn = nn.LSTM(28, 64, num_layers=2)", {}, 128),
    ("self.rnn = nn.LSTM(28, 64, num_layers=1)", {}, 64),
    ("self.rnn = nn.RNN(28, 64, bidirectional=True)", {}, 64),
    ("self.rnn = nn.LSTM(28, n_out)", {}, None),
])
def test_layer_widths_by_their_smaller_sides(body: str, bound: dict[str, int], expected: Optional[int]) -> None:
    assert width(model(body), **bound) == expected


STEP_PER_MODEL = """\
import torch
from torch import nn


def train(model, loader):
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
        loss.backward()
        optimizer.step()


def run(loader, wide):
    train(nn.Linear(784, 64).cuda(), loader)
    {second}


if __name__ == "__main__":
    run(torch.load("batches.pt"), torch.load("model.pt"))
"""


@pytest.mark.parametrize("second, reported", [
    ("train(nn.Linear(784, 32).cuda(), loader)", False),  # every call known and narrow (blind11: diffpool)
    ("train(nn.Linear(784, 1024).cuda(), loader)", True),  # the widest call decides
    ("train(model=nn.Linear(784, 32).cuda(), loader=loader)", False),  # by keyword
    ("train(wide, loader)", True),  # a model the file does not show
    ("steps = [train]", True),  # handed on as a value: called from where the file does not show
])
def test_a_step_function_called_once_per_model(tmp_path: Path, second: str, reported: bool) -> None:
    write(tmp_path, {"train.py": STEP_PER_MODEL.replace("{second}", second)})
    assert (("train.py", 10, "GPU001") in findings(tmp_path, "--select", "GPU001")) is reported


@pytest.mark.parametrize("source, expected", [
    ("n_layer = 12\nHIDDEN = 64\n", {"n_layer": 12, "HIDDEN": 64}),
    ("V, C, B = 12, 32, 256\n", {"V": 12, "C": 32, "B": 256}),  # each name its element
    ("[V, C] = [12, 32]\n", {"V": 12, "C": 32}),
    ("V, C = sizes()\n", {}),  # unpacking a call: unknown
    ("V, C = 12, 32, 64\n", {}),  # lengths differ: unknown
    ("V, *C = 12, 32, 64\n", {}),  # a starred name is a list
    ("C = 64\nV, C = 12, 32\n", {"V": 12}),  # bound twice: unknown
    ("V, C = 12, 'wide'\n", {"V": 12}),
])
def test_module_level_integer_constants(source: str, expected: dict[str, int]) -> None:
    from gpulint.project.facts import _module_ints

    assert _module_ints(ast.parse(source)) == expected
