"""The strategy port: the search service asks a strategy which node of the search tree
to expand next. Strategies are chosen per session by name; ``STRATEGY_NAMES`` is the
list the gateway validates a request against (the search service's registry must offer
exactly these: a test keeps them in step)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from kernelevolve.errors import InvalidArgumentError
from kernelevolve.v1 import common_pb2 as pb

ROOT = ""  # the virtual root: the reference itself; expanding it asks for seed candidates

STRATEGY_NAMES: tuple[str, ...] = ("one-shot", "linear", "greedy", "beam", "mcts", "islands")


class Strategy(Protocol):
    name: str

    def select_parent(self, nodes: Sequence[pb.Node], exhausted: set[str]) -> str | None:
        """Node id to expand (``ROOT`` = new seeds), or None when nothing can be expanded.
        ``exhausted``: nodes whose transformations the synthesizer has run out of."""
        ...


def check_strategy_name(name: str) -> str:
    """``name`` when a strategy of that name exists, else a clear InvalidArgumentError."""
    if name not in STRATEGY_NAMES:
        raise InvalidArgumentError(
            f"unknown search strategy {name!r}; available: {', '.join(sorted(STRATEGY_NAMES))}")
    return name
