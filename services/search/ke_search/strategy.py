"""Strategies decide which node to expand next (the ``kernelevolve.ports.strategy``
port). Greedy now; beam, MCTS and islands plug in behind the same protocol, each
registered here under a name of ``STRATEGY_NAMES``."""

from __future__ import annotations

from collections.abc import Sequence

from kernelevolve.ports.strategy import ROOT, Strategy, check_strategy_name
from kernelevolve.v1 import common_pb2 as pb


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
    return STRATEGIES[check_strategy_name(name)]()
