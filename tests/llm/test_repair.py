"""Which failed nodes the search service asks to repair (``ke_search.repair``)."""

from __future__ import annotations

import pytest

from ke_search.repair import due_repairs
from ke_search.state import RequestRecord, SearchState
from kernelevolve.v1 import common_pb2 as pb


def _node(nid: str, status: int, *, repairable: bool = True, attempt: int = 0, parent: str = "") -> pb.Node:
    params = {"repairable": "1"} if repairable else {}
    if attempt:
        params["repair_attempt"] = str(attempt)
    return pb.Node(node_id=nid, parent_id=parent, evaluated=True, status=status,
                   transformation=pb.Transformation(name="llm_draft", params=params))


@pytest.mark.parametrize("status", [pb.EVALUATION_STATUS_COMPILE_ERROR, pb.EVALUATION_STATUS_RUNTIME_ERROR,
                                    pb.EVALUATION_STATUS_INCORRECT])
def test_a_failed_llm_node_is_repaired_up_to_k_times_then_abandoned(status: int) -> None:
    st = SearchState("s", budget=10, max_inflight=1)
    assert due_repairs(st, [_node("r1-1", status)], 2) == [("r1-1", 1)]
    st.requests["r2"] = RequestRecord(parent_id="r1-1", count=1, repair_attempt=1)
    nodes = [_node("r1-1", status), _node("r2-1", status, attempt=1, parent="r1-1")]
    assert due_repairs(st, nodes, 2) == [("r2-1", 2)]  # asked once per node; the chain goes on
    st.requests["r3"] = RequestRecord(parent_id="r2-1", count=1, repair_attempt=2)
    nodes.append(_node("r3-1", status, attempt=2, parent="r2-1"))
    assert due_repairs(st, nodes, 2) == []  # k = 2 attempts spent: abandoned


def test_correct_timed_out_offline_and_disabled_are_not_repaired() -> None:
    st = SearchState("s", budget=10, max_inflight=1)
    nodes = [_node("a", pb.EVALUATION_STATUS_CORRECT), _node("b", pb.EVALUATION_STATUS_TIMEOUT),
             _node("c", pb.EVALUATION_STATUS_COMPILE_ERROR, repairable=False)]
    assert due_repairs(st, nodes, 2) == []
    assert due_repairs(st, [_node("d", pb.EVALUATION_STATUS_INCORRECT)], 0) == []
