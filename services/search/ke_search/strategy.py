"""Strategies decide which node to expand next. Greedy now; beam, MCTS and islands
plug in behind the same ``Strategy`` protocol."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kernelevolve.errors import InvalidArgumentError
from kernelevolve.v1 import common_pb2 as pb

ROOT = ""  # the virtual root: the reference itself; expanding it asks for seed candidates


class Strategy(Protocol):
    name: str

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        """Node id to expand ("" = root), or None when nothing can be expanded."""
        ...


class Greedy:
    """Always expand the fittest correct node; fall back to the root (new seeds)
    while no node is correct. A node the synthesizer has exhausted is skipped."""

    name = "greedy"

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        correct = [n for n in nodes if n.evaluated and n.status == pb.EVALUATION_STATUS_CORRECT
                   and n.node_id not in exhausted]
        if correct:
            best = max(correct, key=lambda n: (n.fitness, -n.depth, n.node_id))
            return best.node_id
        if ROOT not in exhausted:
            return ROOT
        return None


STRATEGIES: dict[str, type[Greedy]] = {"greedy": Greedy}


def make_strategy(name: str) -> Strategy:
    try:
        return STRATEGIES[name]()
    except KeyError:
        raise InvalidArgumentError(
            f"unknown search strategy {name!r}; available: {', '.join(sorted(STRATEGIES))}") from None
