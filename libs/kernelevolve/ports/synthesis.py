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


@dataclass(frozen=True)
class Proposal:
    """One candidate: a standalone module defining ``ModelNew`` (torch + triton only)."""

    source: str
    transformation: Transformation
    genome: dict[str, str] = field(default_factory=dict)
    # Reference nodes left to a library call because they could not be lowered.
    fallback_nodes: tuple[str, ...] = ()
    description: str = ""


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
