"""One contract suite for the strategy port (``kernelevolve.ports.strategy``), run against
every strategy the search service registers; the registry offers exactly the names the
gateway accepts."""

from __future__ import annotations

import pytest

from ke_search.strategy import STRATEGIES, make_strategy
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.strategy import ROOT, STRATEGY_NAMES, check_strategy_name
from kernelevolve.v1 import common_pb2 as pb

CORRECT = pb.EVALUATION_STATUS_CORRECT


def _node(nid: str, fitness: float, status: int = CORRECT, parent: str = ROOT, depth: int = 0) -> pb.Node:
    return pb.Node(node_id=nid, parent_id=parent, depth=depth, evaluated=True, status=status, fitness=fitness)


def test_the_registry_offers_exactly_the_accepted_names() -> None:
    assert set(STRATEGIES) == set(STRATEGY_NAMES)
    with pytest.raises(InvalidArgumentError, match="available: "):
        check_strategy_name("simulated-annealing")


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_an_empty_tree_asks_for_seeds(name: str) -> None:
    assert make_strategy(name).select_parent([], set()) == ROOT


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_it_picks_an_expandable_node_or_the_root(name: str) -> None:
    nodes = [_node("a", 1.2), _node("b", 0.0, pb.EVALUATION_STATUS_INCORRECT), _node("c", 1.5, parent="a", depth=1)]
    choice = make_strategy(name).select_parent(nodes, {"c"})
    assert choice in {ROOT, "a"}  # never an exhausted node, never an incorrect one


@pytest.mark.parametrize("name", STRATEGY_NAMES)
def test_nothing_left_to_expand_ends_the_search(name: str) -> None:
    nodes = [_node("a", 1.2), _node("b", 0.0, pb.EVALUATION_STATUS_INCORRECT)]
    assert make_strategy(name).select_parent(nodes, {ROOT, "a"}) is None
