"""Screened verdicts in the search: provisional until the full protocol confirms them.

An evaluator that screens (``evaluator.screen``) judges each candidate on one input set
with a short timing (``EvaluationResult.tier == "screen"``). The search may expand such a
node, but never calls it best, distils, exports or reports it: a contender (a screened
correct node within the timing noise of the best so far) is promoted, i.e. judged again by
the full protocol in a fresh worker (the re-check path of finalists), and its fitness is
then the full verdict's. A strategy may ask for promotions too (``nodes_to_promote``)."""

from __future__ import annotations

from collections.abc import Sequence

from kernelevolve.v1 import common_pb2 as pb

SCREEN = "screen"


def tier_of(result: pb.EvaluationResult) -> str:
    """The tier a result was judged by; empty (an evaluator without tiers): full."""
    return result.tier or "full"


def provisional(n: pb.Node) -> bool:
    """Whether a node's fitness rests on a screen alone (no full verdict yet)."""
    return n.tier == SCREEN and not n.retimed


def tier_label(n: pb.Node) -> str:
    """The tier a node's fitness rests on: "full", or "screen" while it is provisional."""
    return SCREEN if provisional(n) else "full"


def _correct(n: pb.Node) -> bool:
    return n.evaluated and n.status == pb.EVALUATION_STATUS_CORRECT and not n.duplicate_of


def contenders(nodes: Sequence[pb.Node], requested: set[str], limit: int,
               asked: Sequence[str] = ()) -> list[str]:
    """Screened correct nodes to promote, fittest first, at most ``limit``: those whose
    interval reaches the best's low end (within noise of the best correct node, screened or
    not), and any in ``asked`` (a strategy's request); none already requested."""
    if limit <= 0:
        return []
    correct = [n for n in nodes if _correct(n)]
    if not correct:
        return []
    best = max(correct, key=lambda n: (n.fitness, -n.depth, n.node_id))
    floor = best.fitness_low or best.fitness
    wanted = set(asked)
    chosen = [n for n in correct
              if provisional(n) and n.node_id not in requested
              and (n.node_id in wanted or (n.fitness_high or n.fitness) >= floor)]
    chosen.sort(key=lambda n: (n.fitness, -n.depth, n.node_id), reverse=True)
    return [n.node_id for n in chosen[:limit]]
