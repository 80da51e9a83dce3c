"""The synthesizer service's translation of a ProposeRequest: the parent's full report
and its siblings reach the ProposalRequest a prompt is built from."""

from __future__ import annotations

import json

from ke_synthesizer.llm.tokens import count_tokens, trim_to_tokens
from ke_synthesizer.service import to_request
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb


def test_report_siblings_and_repair_attempt_are_carried() -> None:
    report = {"status": "incorrect", "reason": "max abs error 0.5 > atol", "correctness": {"trials": 2}}
    msg = spb.ProposeRequest(
        spec=pb.OperatorSpec(name="op", source="x = 1\n"),
        request=ev.CandidateRequested(session_id="s", request_id="r3", parent_id="r1-1", count=1,
                                      repair_attempt=2, hardware=pb.HardwareTarget(kind="cpu")),
        parent_source="class ModelNew: ...\n", parent_report_json=json.dumps(report),
        parent_result=pb.EvaluationResult(candidate_id="r1-1", status=pb.EVALUATION_STATUS_INCORRECT),
        siblings=[spb.AttemptSummary(candidate_id="r2-1", transformation=pb.Transformation(name="llm_repair"),
                                     status=pb.EVALUATION_STATUS_COMPILE_ERROR, reason="syntax error")])
    req = to_request(msg)
    assert req.session_id == "s" and req.repair_attempt == 2 and req.parent is not None
    assert req.parent.report == report and req.parent.result["status"] == "incorrect"
    (sib,) = req.siblings
    assert (sib.candidate_id, sib.status, sib.reason) == ("r2-1", "compile_error", "syntax error")


def test_trimming_keeps_whole_lines_within_the_budget() -> None:
    text = "\n".join(f"line {i}: {'word ' * 10}" for i in range(200))
    for keep in ("head", "tail"):
        cut = trim_to_tokens(text, 100, keep=keep)
        assert count_tokens(cut) <= 100 and "[... trimmed ...]" in cut
        assert ("line 0:" in cut) is (keep == "head") and ("line 199:" in cut) is (keep == "tail")
