"""The repair loop: a failed candidate from a synthesizer that can repair gets more tries.

A node whose evaluation is ``compile_error``, ``runtime_error`` or ``incorrect`` and whose
transformation says ``repairable=1`` (the LLM synthesizer's candidates; the offline
compiler is deterministic, asking it again would repeat the failure) is asked for a
repair: a request with that node as parent and ``repair_attempt`` set, so the synthesizer
shows the model the failed source with its diagnostics. A repair that fails again is
itself repaired with the next attempt number, until ``max_attempts`` attempts were made
for the original node; then the node is abandoned. Pure functions of the search state and
the node list, like the strategies, so replays and replicas decide the same.
"""

from __future__ import annotations

from collections.abc import Sequence

from ke_search.state import SearchState
from kernelevolve.v1 import common_pb2 as pb

REPAIRABLE = frozenset({pb.EVALUATION_STATUS_COMPILE_ERROR, pb.EVALUATION_STATUS_RUNTIME_ERROR,
                        pb.EVALUATION_STATUS_INCORRECT})


def attempt_of(node: pb.Node) -> int:
    """How many repair attempts led to this node (0: an original candidate)."""
    try:
        return int(node.transformation.params.get("repair_attempt", "0") or 0)
    except ValueError:
        return 0


def due_repairs(st: SearchState, nodes: Sequence[pb.Node], max_attempts: int) -> list[tuple[str, int]]:
    """(node id, attempt number) of failed nodes to repair now, oldest first; a node is
    repaired once (a request already names it as parent)."""
    if max_attempts <= 0:
        return []
    asked = {r.parent_id for r in st.requests.values()}
    due = []
    for n in nodes:
        if not (n.evaluated and n.status in REPAIRABLE and n.transformation.params.get("repairable") == "1"):
            continue
        attempt = attempt_of(n) + 1
        if attempt <= max_attempts and n.node_id not in asked and n.node_id not in st.exhausted_parents:
            due.append((n.node_id, attempt))
    return sorted(due, key=lambda d: d[0])
