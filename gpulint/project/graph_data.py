"""How many rows a training step of a file feeds its model, when a standard benchmark dataset says so.

GPU001's payoff depends on the work of a step's matrix multiplications, rows x width x width, not on
width alone: a 512-wide graph network trained full-batch on Cora multiplies 2,708 rows and stays
launch-bound (bench/amp_width.py). The rows are rarely visible in code, but for the public benchmark
graphs that examples and papers train on (Planetoid's Cora, TUDataset's PROTEINS, MoleculeNet's
ESOL, ...) the size is a published constant. This module knows those constants (one table) and reads,
with CPython's `ast`, which of them a file loads and how it batches them:

- node-level datasets (one graph) trained with no loader at all: a step sees every node;
- graph-level datasets batched by a `DataLoader` with a known `batch_size`: a step sees
  batch_size x the average nodes per graph;
- anything else (a dataset gpulint does not know, a name it cannot read, a neighbour sampler, a
  loader over a node-level graph, a batch size it cannot read): unknown, and unknown is not small.
"""

from __future__ import annotations

import ast
import re
from functools import cached_property
from typing import Iterator, Optional

from gpulint.project.ast_nodes import all_nodes

# Node-level benchmark graphs: name (lower case) -> nodes. Published statistics (PyG's dataset
# cheatsheet). Only graphs small enough to matter here; a graph not listed is unknown.
NODE_GRAPHS: dict[str, dict[str, int]] = {
    "Planetoid": {"cora": 2708, "citeseer": 3327, "pubmed": 19717},
    "CitationFull": {"cora": 19793, "cora_ml": 2995, "citeseer": 4230, "dblp": 17716, "pubmed": 19717},
    "Amazon": {"computers": 13752, "photo": 7650},
    "Coauthor": {"cs": 18333, "physics": 34493},
    "WebKB": {"cornell": 183, "texas": 183, "wisconsin": 251},
    "WikipediaNetwork": {"chameleon": 2277, "squirrel": 5201, "crocodile": 11631},
    "Entities": {"aifb": 8285, "mutag": 23644},
    "Actor": {"": 7600},
    "KarateClub": {"": 34},
    "IMDB": {"": 11616},
    "DBLP": {"": 26128},
    "MovieLens": {"": 10352},
    "BAShapes": {"": 700},
    "FacebookPagePage": {"": 22470},
    "LastFMAsia": {"": 7624},
}
# Graph-level benchmark datasets: name (lower case) -> average nodes per graph (published statistics).
GRAPH_SETS: dict[str, dict[str, float]] = {
    "TUDataset": {
        "mutag": 17.9, "proteins": 39.1, "proteins_full": 39.1, "enzymes": 32.6, "nci1": 29.9, "nci109": 29.7,
        "ptc_mr": 14.3, "dd": 284.3, "imdb-binary": 19.8, "imdb-multi": 13.0, "collab": 74.5,
        "reddit-binary": 429.6, "reddit-multi-5k": 508.5, "mutagenicity": 30.3, "colors-3": 61.3,
        "triangles": 20.9, "frankenstein": 16.9,
    },
    "MoleculeNet": {
        "esol": 13.3, "freesolv": 8.7, "lipo": 27.0, "pcba": 26.0, "muv": 24.2, "hiv": 25.5, "bace": 34.1,
        "bbbp": 24.1, "tox21": 18.6, "toxcast": 18.7, "sider": 33.6, "clintox": 26.2,
    },
    "GNNBenchmarkDataset": {"mnist": 70.6, "cifar10": 117.6, "pattern": 118.9, "cluster": 117.2, "csl": 41.0},
    "PygGraphPropPredDataset": {"ogbg-molhiv": 25.5, "ogbg-molpcba": 26.0},
    "ZINC": {"": 23.2},
    "QM9": {"": 18.0},
    "QM7b": {"": 16.4},
    "MNISTSuperpixels": {"": 75.0},
    "PPI": {"": 2372.7},
    "BA2MotifDataset": {"": 25.0},
}
# torchvision datasets that hold every item in memory as a small image, by class name -> the image's side in
# pixels (28 for the MNIST family, 32 for CIFAR and SVHN, 16 for USPS; at most SVHN's 73,257 training images)
SMALL_IMAGE_SETS: dict[str, int] = {
    "MNIST": 28, "FashionMNIST": 28, "KMNIST": 28, "QMNIST": 28, "CIFAR10": 32, "CIFAR100": 32, "SVHN": 32, "USPS": 16,
}
# where each class takes its name: (position, keyword); the OGB classes take it first
_NAME_AT: dict[str, tuple[int, str]] = {"PygGraphPropPredDataset": (0, "name")}
_DEFAULT_NAME_AT = (1, "name")
# loaders that sample subgraphs or batch otherwise: the rows of a step are not the dataset's
_SAMPLERS = frozenset({
    "NeighborLoader", "LinkNeighborLoader", "NeighborSampler", "ClusterLoader", "ClusterData", "HGTLoader",
    "GraphSAINTNodeSampler", "GraphSAINTEdgeSampler", "GraphSAINTRandomWalkSampler", "ShaDowKHopSampler",
    "RandomNodeLoader", "DynamicBatchSampler", "TemporalDataLoader", "DataListLoader", "DenseDataLoader",
    "NodeLoader", "LinkLoader", "ImbalancedSampler", "GraphDataLoader",
})
_LOADERS = frozenset({"DataLoader"})
# the callees `step_rows` and `image_rows` need, as a call or a `from ... import X as Y` spells them: a file
# that spells none of them gives None without a walk (project/facts.py)
DATASET_CALLS = frozenset(NODE_GRAPHS) | frozenset(GRAPH_SETS)
IMAGE_SET_CALLS = frozenset(SMALL_IMAGE_SETS)


def _last(func: ast.AST) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _argument(call: ast.Call, at: tuple[int, str]) -> Optional[ast.AST]:
    position, keyword = at
    for each in call.keywords:
        if each.arg == keyword:
            return each.value
    return call.args[position] if len(call.args) > position else None


def _argparse_values(tree: ast.Module) -> dict[str, list[object]]:
    """dest -> the values an argparse flag can take: its choices, else its default."""
    out: dict[str, list[object]] = {}
    for node in all_nodes(tree):
        if not (isinstance(node, ast.Call) and _last(node.func) == "add_argument" and node.args):
            continue
        flag = node.args[0]
        if not (isinstance(flag, ast.Constant) and isinstance(flag.value, str)):
            continue
        dest = flag.value.lstrip("-").replace("-", "_")
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        for key in ("choices", "default"):
            if key in keywords:
                try:
                    value = ast.literal_eval(keywords[key])
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue
                out[dest] = list(value) if isinstance(value, (list, tuple, set)) else [value]
                break
    return out


def _assigned(tree: ast.Module) -> dict[str, list[ast.AST]]:
    """name -> every value assigned to it anywhere in the file (each a possibility)."""
    out: dict[str, list[ast.AST]] = {}
    for node in all_nodes(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            out.setdefault(node.target.id, []).append(node.value)
    return out


class _Values:
    """The constants an expression of the file can be: literals, names bound to them, argparse flags."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree

    @cached_property
    def assigned(self) -> dict[str, list[ast.AST]]:  # read on first use: most files build no benchmark dataset
        return _assigned(self.tree)

    @cached_property
    def flags(self) -> dict[str, list[object]]:
        return _argparse_values(self.tree)

    def of(self, node: Optional[ast.AST], depth: int = 0) -> Optional[list[object]]:
        """Every value, or None when one of them cannot be read."""
        if node is None or depth > 4:
            return None
        if isinstance(node, ast.Constant):
            return [node.value]
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return list(self.flags[node.attr]) if self.flags.get(node.attr) else None  # args.dataset
        if isinstance(node, ast.Name):
            values: list[object] = []
            for value in self.assigned.get(node.id, []):
                if isinstance(value, ast.Call):
                    continue  # `dataset = Planetoid(path, dataset)`: the rebinding, not a name
                found = self.of(value, depth + 1)
                if found is None:
                    return None
                values += found
            return values or None
        return None


def _import_names(tree: ast.Module) -> dict[str, str]:
    """local name -> imported name, for `from x import Name as Alias`."""
    return {alias.asname: alias.name for node in all_nodes(tree) if isinstance(node, ast.ImportFrom)
            for alias in node.names if alias.asname}


def _datasets(tree: ast.Module, values: _Values) -> Iterator[tuple[str, Optional[float]]]:
    """("node" | "graph", size) for each benchmark dataset the file builds; size None when unknown."""
    imported = _import_names(tree)
    for node in all_nodes(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _last(node.func)
        name = imported.get(name, name)
        table: Optional[dict[str, float]] = None
        kind = ""
        if name in NODE_GRAPHS:
            table, kind = {k: float(v) for k, v in NODE_GRAPHS[name].items()}, "node"
        elif name in GRAPH_SETS:
            table, kind = GRAPH_SETS[name], "graph"
        if table is None:
            continue
        if "" in table:
            yield kind, table[""]
            continue
        names = values.of(_argument(node, _NAME_AT.get(name, _DEFAULT_NAME_AT)))
        sizes = [table.get(str(n).lower()) for n in names] if names else [None]
        yield kind, None if any(s is None for s in sizes) else max(s for s in sizes if s is not None)


def _batch_sizes(tree: ast.Module, values: _Values) -> Optional[list[int]]:
    """The batch size of every `DataLoader` of the file, or None when one cannot be read."""
    out: list[int] = []
    for node in all_nodes(tree):
        if isinstance(node, ast.Call) and _last(node.func) in _LOADERS:
            found = values.of(_argument(node, (1, "batch_size")))
            if not found or not all(type(v) is int for v in found):
                return None
            out += [int(v) for v in found]  # type: ignore[call-overload]
    return out


def step_rows(tree: ast.Module) -> Optional[int]:
    """The most rows a training step of this file can feed its model, when benchmark datasets say so."""
    if any(isinstance(n, ast.Call) and _last(n.func) in _SAMPLERS for n in all_nodes(tree)):
        return None
    values = _Values(tree)
    found = list(_datasets(tree, values))
    if not found or any(size is None for _, size in found):
        return None
    batches = _batch_sizes(tree, values)
    if batches is None:
        return None
    rows = 0.0
    for kind, size in found:
        assert size is not None
        if kind == "node":
            if batches:
                return None  # a loader over one graph's nodes or edges: its batches, not the graph
            rows = max(rows, size)
        else:
            if not batches:
                return None  # a graph-level dataset with no loader here: batched somewhere unseen
            rows = max(rows, max(batches) * size)
    return int(rows + 0.5)


# names that may make a step's images larger than the benchmark's, or load data of another kind
_RESIZES = re.compile(r"Resize|Scale$|interpolate|Upsample|ImageFolder")


def image_rows(tree: ast.Module) -> Optional[tuple[int, int]]:
    """(the largest batch size, the image side) when the file trains on a small torchvision benchmark held in
    memory (SMALL_IMAGE_SETS) and nothing it loads or does makes larger images (no resize, no dataset class or
    image folder of its own); None otherwise."""
    sides: list[int] = []
    for node in all_nodes(tree):
        if isinstance(node, (ast.Name, ast.Attribute)) and _RESIZES.search(_last(node)):
            return None
        if isinstance(node, ast.ClassDef) and any(_last(b).endswith("Dataset") for b in node.bases):
            return None
        if isinstance(node, ast.Call) and _last(node.func) in SMALL_IMAGE_SETS:
            sides.append(SMALL_IMAGE_SETS[_last(node.func)])
    if not sides:
        return None
    batches = _batch_sizes(tree, _Values(tree))
    if not batches:
        return None
    return max(batches), max(sides)
