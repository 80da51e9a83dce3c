"""The tuning stage: the end of a session's budget spent on the launch configurations of
its best candidates instead of on more structure.

The structural search (draft and expansion) mixes structural moves (fusion, impl,
layout, ...) with launch knobs (tile sizes, warps, stages) of whatever node it expands.
With ``tune_share`` > 0 the last ``floor(budget * tune_share)`` evaluations go to a
tuning stage instead: it asks the synthesizer for launch-config neighbours
(``CandidateRequested.tune``) of the elite, the ``tune_elite`` fittest correct candidates
of the structural search, the elites taking turns so that each gets a short sweep. The
stage starts once the structural share has been generated (so that twins, which cost
nothing, are known), or earlier when the strategy's expansion stalls (nothing left to
expand, nothing out). When every elite's neighbours are exhausted and budget is left,
the structural search takes the rest. The best of all candidates is the session's
result, as always.

Pure functions of the session, the search state and the node list, like the strategies:
the stage's requests are durable request records (``RequestRecord.tune``), so a replay,
a replica or a resumed session decides the same and never asks for them again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from ke_search.state import SearchState, request_of
from ke_search.strategy import is_correct, rank
from kernelevolve.v1 import common_pb2 as pb

# The elite size of a session record that predates the option (the settings' default).
DEFAULT_ELITE = 2


class Ask(Enum):
    """What the stage can do now."""

    ASKED = "asked"  # requests made
    WAIT = "wait"  # an elite's request or a structural candidate is still out
    NONE = "none"  # nothing left to tune: the structural search may go on


@dataclass(frozen=True)
class Stage:
    share: float
    elite: int

    @classmethod
    def of(cls, session: pb.Session) -> Stage:
        return cls(max(0.0, min(1.0, session.tune_share)), session.tune_elite or DEFAULT_ELITE)

    def budget(self, st: SearchState, seeds: int = 0) -> int:
        """Evaluations reserved for the stage: never all of them (there must be a structural
        candidate to tune) and never the draft's."""
        if self.share <= 0:
            return 0
        return max(0, min(int(st.budget * self.share), st.budget - max(1, seeds)))

    def structural_left(self, st: SearchState, seeds: int = 0) -> int:
        """Candidates the structural search may still ask for before the stage is due."""
        return max(0, st.budget - self.budget(st, seeds) - st.spent() - st.pending())


def tuned(st: SearchState) -> set[str]:
    """Ids of the requests the tuning stage made."""
    return {rid for rid, r in st.requests.items() if r.tune}


def structural_pending(st: SearchState) -> bool:
    """A structural request still has candidates to come."""
    return any(n > 0 and not st.requests[rid].tune for rid, n in st.pending_by_request().items())


def elites(st: SearchState, nodes: Sequence[pb.Node], k: int) -> list[str]:
    """The ``k`` fittest correct candidates of the structural search (not of the stage
    itself), fittest first; ``nodes`` is the noise-aware view the strategies see."""
    ours = tuned(st)
    correct = [n for n in nodes if is_correct(n) and not n.duplicate_of and request_of(n.node_id) not in ours]
    correct.sort(key=rank, reverse=True)
    return [n.node_id for n in correct[:k]]


def requests(st: SearchState, nodes: Sequence[pb.Node], k: int, want: int) -> tuple[Ask, list[tuple[str, int]]]:
    """(parent, count) tuning requests for ``want`` more candidates: the elite members with
    no request of the stage still out, those with the fewest neighbours asked first, the
    candidates shared evenly among them."""
    top = [e for e in elites(st, nodes, k) if e not in st.tune_exhausted]
    pending = st.pending_by_request()
    asked: dict[str, int] = {e: 0 for e in top}
    busy: set[str] = set()
    for rid, r in st.requests.items():
        if r.tune and r.parent_id in asked:
            asked[r.parent_id] += r.count - r.exhausted
            if pending.get(rid, 0) > 0:
                busy.add(r.parent_id)
    free = sorted((e for e in top if e not in busy), key=lambda e: asked[e])  # stable: fittest first among equals
    if not free:
        # A structural candidate still out may yet join the elite; the stage's own never do.
        inflight = {request_of(cid) for cid in set(st.generated) - set(st.evaluated) - set(st.duplicates)}
        waiting = busy or structural_pending(st) or inflight - tuned(st)
        return (Ask.WAIT if waiting else Ask.NONE), []
    out = []
    for i, e in enumerate(free):
        if want <= 0:
            break
        count = math.ceil(want / (len(free) - i))
        out.append((e, count))
        want -= count
    return Ask.ASKED, out


def summary(st: SearchState, nodes: Sequence[pb.Node]) -> dict[str, object]:
    """The stage in ``summary.json``: whether it ran, the elites it swept, its candidates
    (each node's transformation says which knobs it changed) and the best of them."""
    ours = tuned(st)
    made = [n for n in nodes if request_of(n.node_id) in ours]
    best = max((n for n in made if is_correct(n)), key=rank, default=None)
    return {"ran": st.tuning, "elites": sorted({st.requests[r].parent_id for r in ours}),
            "candidates": sorted(n.node_id for n in made if not n.duplicate_of),
            "best": best.node_id if best else "", "best_fitness": best.fitness if best else 0.0}
