"""step_rows: the rows a step feeds its model, from the benchmark datasets a file loads."""

import ast
import textwrap
from typing import Optional

import pytest

from gpulint.project.graph_data import step_rows


def rows(source: str) -> Optional[int]:
    return step_rows(ast.parse(textwrap.dedent(source)))


def test_full_batch_node_graph_is_all_its_nodes() -> None:
    assert rows("dataset = Planetoid(path, 'Cora')\ndata = dataset[0]") == 2708


def test_name_through_a_variable_and_argparse_choices_takes_the_largest() -> None:
    assert rows("name = 'CiteSeer'\ndataset = Planetoid(path, name)") == 3327
    source = """
        parser.add_argument('--dataset', default='Cora', choices=['Cora', 'PubMed'])
        dataset = Planetoid(path, args.dataset)
    """
    assert rows(source) == 19717


def test_graph_level_dataset_is_batch_size_times_its_average_graph() -> None:
    source = """
        from ogb.graphproppred import PygGraphPropPredDataset as OGBG
        dataset = OGBG('ogbg-molhiv', root)
        train = DataLoader(dataset, batch_size=32)
        test = DataLoader(dataset, batch_size=64)
    """
    assert rows(source) == 1632  # the largest loader: 64 x 25.5


@pytest.mark.parametrize("source", [
    "dataset = Planetoid(path, name)",  # a name that cannot be read
    "dataset = Planetoid(path, 'Cora')\nloader = NeighborLoader(dataset[0], num_neighbors=[10])",  # sampled
    "dataset = Planetoid(path, 'Cora')\nloader = DataLoader(range(10), batch_size=4)",  # a loader over one graph
    "dataset = TUDataset(path, 'PROTEINS')",  # batched somewhere unseen
    "dataset = TUDataset(path, 'PROTEINS')\nloader = DataLoader(dataset, batch_size=args.bs)",  # unknown batch
    "dataset = PygNodePropPredDataset('ogbn-products')",  # not a small benchmark gpulint knows
    "model = Net()",  # no dataset at all
])
def test_unknown_rows(source: str) -> None:
    assert rows(source) is None
