"""Skill priors: distilled skills (read through the knowledge port) bias which node a
strategy expands.

A node reached by a transformation that a skill says pays in this context (same
hardware, same op family) is a promising place to continue: MCTS adds a prior term to
its UCB score that fades as the node's subtree grows (PUCT-style, so measurements
soon outweigh the prior), and Islands prefers such a node among equally fit members.
The bonus of a skill is its measured lower gain bound on a log scale, relative to the
best skill known: 1 for the best, near 0 for a barely separated one; demoted skills
count half. Without skills every bonus is 0 and strategies behave as they always did.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kernelevolve.ports.knowledge import SkillHint
from kernelevolve.v1 import common_pb2 as pb

_DEMOTED_WEIGHT = 0.5


class SkillPriors:
    def __init__(self, hints: Sequence[SkillHint]) -> None:
        usable = [h for h in hints if h.transformation and h.status in ("active", "demoted") and h.gain_low > 1.0]
        top = max((math.log(h.gain_low) for h in usable), default=0.0)
        self._hints = [(h, (math.log(h.gain_low) / top if top > 0 else 0.0)
                        * (_DEMOTED_WEIGHT if h.status == "demoted" else 1.0)) for h in usable]

    def __bool__(self) -> bool:
        return bool(self._hints)

    def __len__(self) -> int:
        return len(self._hints)

    def bonus(self, transformation: pb.Transformation) -> float:
        """0..1: how strongly skills back the transformation that produced a node. A skill
        matches when its name is the same and each of its params has the same value."""
        best = 0.0
        for hint, weight in self._hints:
            if hint.transformation != transformation.name:
                continue
            if all(transformation.params.get(k) == v for k, v in hint.params.items()):
                best = max(best, weight)
        return best


NO_PRIORS = SkillPriors(())
