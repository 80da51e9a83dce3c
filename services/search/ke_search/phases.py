"""The two phases of a search: a draft of independent samples from the reference, then
expansion, where the strategy picks parents from the tree (each request names the
parent; the synthesizer sees its ancestors' and siblings' transformations through it).

The draft is derived from the request records alone, so it survives restarts and
replicas: it lasts until ``seeds`` root candidates have been asked for (less any the
synthesizer could not make), or the root is exhausted."""

from __future__ import annotations

from ke_search.state import SearchState
from kernelevolve.ports.strategy import ROOT


def draft_seeds(strategy: object, seeds: int) -> int:
    """The session's seeds, or the strategy's own draft size when none was asked for."""
    if seeds > 0:
        return seeds
    return int(getattr(strategy, "width", 0) or getattr(strategy, "islands", 0) or 0)


def draft_room(st: SearchState, seeds: int) -> int:
    """Root candidates still to ask for in the draft phase (0: the draft is over)."""
    if seeds <= 0 or ROOT in st.exhausted_parents:
        return 0
    asked = sum(r.count - r.exhausted for r in st.requests.values() if r.parent_id == ROOT)
    return max(0, seeds - asked)
