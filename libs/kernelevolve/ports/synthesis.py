"""The synthesizer port: what the service asks of any candidate generator.

Plain dataclasses so that an offline compiler and an LLM client implement the same
``CandidateSynthesizer`` protocol and pass one contract suite.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Transformation:
    """The edge from a parent candidate to a child: a name and its parameters."""

    name: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ParentInfo:
    candidate_id: str
    source: str
    transformation: Transformation
    # The full set of choices the parent was generated from (see Proposal.genome).
    genome: dict[str, str] = field(default_factory=dict)
    # The parent's evaluation summary: status, speedup, diagnosis (bound class, ...).
    result: dict[str, Any] = field(default_factory=dict)
    # The parent's full evaluation report as stored (correctness figures, timing, profile,
    # diagnosis, error text); empty when unknown.
    report: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AttemptSummary:
    """What an earlier child of the same parent came to (status as in ParentInfo.result)."""

    candidate_id: str
    transformation: Transformation
    status: str
    speedup: float = 0.0
    reason: str = ""


@dataclass(frozen=True)
class ProposalRequest:
    spec_source: str
    spec_name: str
    count: int = 1
    # None: propose seed candidates derived from the reference.
    parent: ParentInfo | None = None
    # Edges already taken from this parent, so proposals do not repeat them.
    tried: tuple[Transformation, ...] = ()
    hardware_kind: str = "cpu"
    # Where the request comes from (empty outside a session): lets a synthesizer that waits
    # for answers from outside (the agent synthesizer) name its requests durably.
    session_id: str = ""
    request_id: str = ""
    # > 0: repair the failed parent; counts attempts on the same original node.
    repair_attempt: int = 0
    # The parent's other children, for prompts that should not repeat them.
    siblings: tuple[AttemptSummary, ...] = ()
    # The search's tuning stage: launch-config neighbours of ``parent`` only (same kernels
    # and fusion, other tile sizes / warps / stages), each one a configuration not in
    # ``tried``. A synthesizer that cannot tell launch knobs apart may answer with its own
    # tuned variants of the parent.
    tune: bool = False
    # The session's precision contract (kernelevolve.precision): "default" lets eager's
    # convolutions run TF32 (cuDNN), "tf32" its matmuls too, "strict" nothing. A synthesizer
    # may use TF32 (``tl.dot`` with ``allow_tf32``/``input_precision``) exactly where the
    # contract lets eager use it.
    precision: str = "default"


@dataclass(frozen=True)
class Proposal:
    """One candidate: a standalone module defining ``ModelNew`` (torch + triton only)."""

    source: str
    transformation: Transformation
    genome: dict[str, str] = field(default_factory=dict)
    # Reference nodes left to a library call because they could not be lowered.
    fallback_nodes: tuple[str, ...] = ()
    description: str = ""
    # Why this proposal was refused before evaluation (a reply that does not parse, lacks
    # ModelNew or breaks the static policy); "" = evaluate it. A refused proposal becomes a
    # failed node of the lineage without spending an evaluation.
    rejected: str = ""
    # What produced it, stored next to the candidate (an LLM's prompt, reply, model,
    # tokens, latency, cost, template version); empty for deterministic synthesizers.
    record: dict[str, Any] = field(default_factory=dict)


class CandidateSynthesizer(Protocol):
    name: str

    def propose(self, request: ProposalRequest) -> list[Proposal]:
        """Return up to ``request.count`` new proposals (may be fewer, never raises for
        an op it cannot lower: it falls back to a correct library-call candidate).

        Raises ``kernelevolve.errors.InvalidSpecError`` for a spec it cannot even load.
        """
        ...


@runtime_checkable
class AsyncProposer(Protocol):
    """A synthesizer that waits on I/O for a long time (answers from outside) also offers
    ``apropose``; the service awaits it on its event loop instead of holding a thread."""

    async def apropose(self, request: ProposalRequest) -> list[Proposal]: ...
