"""A scripted fitness landscape for search tests: a synthesizer double that walks a grid
(seeds are random points, children the unvisited neighbours of their parent) and a judge
double whose speedup is a known function of the point, with timing intervals of a chosen
width. The optimum is known, so tests can count the evaluations a strategy needs."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.ports.synthesis import Proposal, ProposalRequest, Transformation
from kernelevolve.ports.verdict import Diagnosis, SpecCheck, Timing, Verdict

Point = tuple[int, int]
_POINT = re.compile(r"POINT = \((\d+), (\d+)\)")
_MODULE = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, *xs):\n        return xs[0]\n"


def source_of(p: Point, family: str = "tile") -> str:
    return f'"""Candidate at {p}."""\n# family {family}\nPOINT = ({p[0]}, {p[1]})\n{_MODULE}'


def point_of(source: str) -> Point:
    m = _POINT.search(source)
    assert m is not None, source
    return int(m.group(1)), int(m.group(2))


def deceptive(size: int) -> Callable[[Point], float]:
    """A broad local peak near the origin that draws hill climbers, and a narrow global
    peak (4.0) in the far corner: gradients lead away from the optimum."""
    far = (size - 2, size - 2)

    def f(p: Point) -> float:
        d_local = abs(p[0] - 1) + abs(p[1] - 1)
        d_far = abs(p[0] - far[0]) + abs(p[1] - far[1])
        return max(0.2, 2.0 - 0.08 * d_local, 4.0 - 1.0 * d_far)

    return f


def smooth(size: int) -> Callable[[Point], float]:
    """One peak (3.0) at the centre: every strategy should find it."""
    c = size // 2

    def f(p: Point) -> float:
        return max(0.2, 3.0 - 0.25 * (abs(p[0] - c) + abs(p[1] - c)))

    return f


@dataclass
class GridSynthesizer:
    """Seeds: random points (deterministic per seed); children: the 4 neighbours of the
    parent not yet tried from it. ``twins``: every child is also proposed once more with
    only its comments and docstring changed (a twin that costs nothing if de-duplicated)."""

    size: int = 10
    seed: int = 0
    twins: bool = False
    name: str = "grid"
    calls: list[ProposalRequest] = field(default_factory=list)

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        self.calls.append(request)
        rng = random.Random(f"{self.seed}-{len(self.calls)}")
        if request.parent is None:
            pts = [(rng.randrange(self.size), rng.randrange(self.size)) for _ in range(request.count)]
        else:
            x, y = point_of(request.parent.source)
            tried = {t.params.get("to") for t in request.tried}
            pts = [(x + dx, y + dy) for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1))
                   if 0 <= x + dx < self.size and 0 <= y + dy < self.size and f"{x + dx},{y + dy}" not in tried]
        out: list[Proposal] = []
        for p in pts:
            t = Transformation("tile", {"to": f"{p[0]},{p[1]}"})
            out.append(Proposal(source=source_of(p), transformation=t, genome={"to": t.params["to"]}))
            if self.twins and request.parent is not None:
                out.append(Proposal(source=source_of(p, family="twin").replace("Candidate", "Same"),
                                    transformation=Transformation("tile", {"to": t.params["to"], "twin": "1"}),
                                    genome={"to": t.params["to"]}))
        return out[:request.count]


@dataclass
class GridJudge:
    """Speedup = ``landscape(point)``; each timing's CI is +-``noise`` (relative) around the
    median. ``bumps``: point -> an extra first-timing speedup a re-timing does not see
    (a lucky first timing). ``roofline``: roofline fraction = speedup * roofline."""

    landscape: Callable[[Point], float]
    noise: float = 0.0
    bumps: dict[Point, float] = field(default_factory=dict)
    roofline: float = 0.0
    evaluated: list[str] = field(default_factory=list)
    retimed: list[str] = field(default_factory=list)

    def validate_spec(self, spec_source: str, spec_name: str) -> SpecCheck:
        return SpecCheck(ok=True)

    def speed(self, candidate_source: str, fresh_worker: bool) -> float:
        p = point_of(candidate_source)
        return self.landscape(p) + (0.0 if fresh_worker else self.bumps.get(p, 0.0))

    def evaluate_many(self, jobs: Iterable[Sequence[Any]]) -> list[Verdict]:
        return [self.evaluate(*job) for job in jobs]

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, compile_baseline: bool = False, tier: str | None = None) -> Verdict:
        (self.retimed if fresh_worker else self.evaluated).append(candidate_id)
        speed = self.speed(candidate_source, fresh_worker)
        cand_ms, base_ms = 1.0 / speed, 1.0
        n = self.noise
        return Verdict(status="correct", reason="ok", candidate_id=candidate_id, speedup=speed,
                       candidate_timing=Timing(median_ms=cand_ms, ci_low_ms=cand_ms * (1 - n),
                                               ci_high_ms=cand_ms * (1 + n), trials=5),
                       baseline_timing=Timing(median_ms=base_ms, ci_low_ms=base_ms * (1 - n),
                                              ci_high_ms=base_ms * (1 + n), trials=5),
                       diagnosis=Diagnosis(roofline_fraction=min(1.0, speed * self.roofline)))
