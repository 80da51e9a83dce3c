"""Why a session stops asking for candidates: the first of its budgets or goals reached.

Each reason is one line that the session record (``end_reason``) and summary carry."""

from __future__ import annotations

from collections.abc import Sequence

from ke_search.noise import since_improvement
from ke_search.state import SearchState
from kernelevolve.v1 import common_pb2 as pb

BUDGET = "budget"
TIME_LIMIT = "time limit"
PLATEAU = "plateau"
TARGET = "target reached"
EXHAUSTED = "search space exhausted"
CANCELLED = "cancelled"
FAILED = "failed"


def deadline(session: pb.Session) -> float | None:
    """Epoch seconds when the session's wall-clock budget runs out (None: no limit). From
    the session's creation, so every replica (and a restarted one) agrees."""
    if session.time_limit_s <= 0:
        return None
    return session.created_at.seconds + session.created_at.nanos / 1e9 + session.time_limit_s


def end_reason(st: SearchState, nodes: Sequence[pb.Node], session: pb.Session, now: float) -> str:
    """The reason to stop now, or "" to go on."""
    if st.failure:
        return FAILED
    if st.cancelled:
        return CANCELLED
    if len(st.evaluated) >= st.budget:
        return BUDGET
    limit = deadline(session)
    if limit is not None and now >= limit:
        return f"{TIME_LIMIT} of {session.time_limit_s:g} s"
    if session.plateau > 0 and len(st.evaluated) >= session.plateau:
        if since_improvement(nodes, st.evaluated) >= session.plateau:
            return f"{PLATEAU}: no CI-separated improvement in {session.plateau} evaluations"
    if session.target_roofline > 0:
        hit = [n for n in nodes if n.evaluated and n.status == pb.EVALUATION_STATUS_CORRECT
               and n.roofline_fraction >= session.target_roofline]
        if hit:
            return f"{TARGET}: {hit[0].node_id} at {hit[0].roofline_fraction:.0%} of the roofline"
    return ""
