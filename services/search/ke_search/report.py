"""Session-level findings for the summary, drawn from the search tree.

``common_failure``: when every evaluated candidate failed the same way before running
(its module did not import, or ``ModelNew(*get_init_inputs())`` raised), the cause is
almost always in how the candidates were built from the spec, not in any one kernel;
one line naming it says more than ``best: null``.
"""

from __future__ import annotations

from kernelevolve.v1 import common_pb2 as pb

# Reasons the judge gives when a candidate failed before any of its code ran on inputs.
_BEFORE_RUNNING = (
    "syntax error at line",
    "candidate module raised on import:",
    "candidate does not define ModelNew",
    "ModelNew is not a torch.nn.Module subclass",
    "ModelNew(*get_init_inputs()) raised:",
)
_STATUSES = {pb.EVALUATION_STATUS_COMPILE_ERROR, pb.EVALUATION_STATUS_REJECTED}


def _cause(reason: str) -> str:
    """The reason without where it happened: candidates differ in line numbers, not in cause."""
    return reason.split(" [at ", 1)[0].strip()


def common_failure(nodes: list[pb.Node]) -> str:
    evaluated = [n for n in nodes if n.evaluated]
    if not evaluated:
        return ""
    first = evaluated[0]
    cause = _cause(first.reason)
    if not cause.startswith(_BEFORE_RUNNING):
        return ""
    for n in evaluated:
        if n.status not in _STATUSES or _cause(n.reason) != cause:
            return ""
    status = pb.EvaluationStatus.Name(first.status).removeprefix("EVALUATION_STATUS_").lower()
    count = "the only candidate" if len(evaluated) == 1 else f"all {len(evaluated)} candidates"
    return " ".join(f"{count} failed before running, the same way ({status}): {first.reason}".split())
