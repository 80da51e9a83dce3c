"""Which model answers the next request: Thompson sampling on measured outcomes.

The arms are the models of every configured endpoint together (``LlmSettings.arms``), so
a cheap local model and a hosted one compete on the same measured terms.

Each model keeps a Beta posterior on its correct-rate (Beta(1 + correct, 1 + failed)) and
the mean fitness gain of its correct candidates (child speedup minus the parent's, at
least a small floor so a correct candidate is worth something) per thousand tokens, or
per USD when prices are configured. A draw is ``p_correct * (floor + gain) / cost``; the
largest draw wins. Each model is pulled once before any draw, so none is judged on the prior alone.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Collection
from dataclasses import dataclass

_FLOOR_GAIN = 0.05


@dataclass
class Arm:
    correct: int = 0
    failed: int = 0
    gain: float = 0.0  # summed over correct outcomes
    tokens: int = 0
    usd: float = 0.0
    pulls: int = 0

    def cost(self, by_usd: bool) -> float:
        n = max(1, self.correct + self.failed)
        if by_usd and self.usd > 0:
            return self.usd / n
        return max(1.0, self.tokens / n / 1000.0)


class ModelBandit:
    def __init__(self, models: tuple[str, ...], *, seed: int = 0, by_usd: bool = False) -> None:
        self.arms = {m: Arm() for m in models}
        self._rng = random.Random(seed)
        self._by_usd = by_usd
        self._lock = threading.Lock()

    def choose(self, exclude: Collection[str] = ()) -> str:
        """The next arm, never one of ``exclude`` (arms of an endpoint that is resting)."""
        with self._lock:
            arms = {m: arm for m, arm in self.arms.items() if m not in exclude}
            if not arms:
                raise ValueError("every arm is excluded")
            untried = [m for m, arm in arms.items() if arm.pulls == 0]
            if untried:
                self.arms[untried[0]].pulls += 1
                return untried[0]
            best, best_draw = "", -1.0
            for model, arm in arms.items():
                p = self._rng.betavariate(1 + arm.correct, 1 + arm.failed)
                gain = arm.gain / arm.correct if arm.correct else 0.0
                draw = p * (_FLOOR_GAIN + max(0.0, gain)) / arm.cost(self._by_usd)
                if draw > best_draw:
                    best, best_draw = model, draw
            self.arms[best].pulls += 1
            return best

    def observe(self, model: str, *, correct: bool, gain: float = 0.0, tokens: int = 0, usd: float = 0.0) -> None:
        with self._lock:
            arm = self.arms.get(model)
            if arm is None:
                return
            if correct:
                arm.correct += 1
                arm.gain += gain
            else:
                arm.failed += 1
            arm.tokens += tokens
            arm.usd += usd
