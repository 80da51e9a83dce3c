"""The knowledge port over gRPC: a ``KnowledgeReader`` that asks the knowledge service
(directly, or through the gateway, which serves the same ``Knowledge`` API).

Blocking calls, like the port: a caller on an event loop runs them in a worker thread
(``asyncio.to_thread``), which also keeps an in-process knowledge server reachable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from kernelevolve.errors import DependencyTimeout, IndexUnavailable
from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.grpc_util import error_from_status
from kernelevolve.ports.knowledge import LEVELS, RetrievedDoc, SkillHint
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc

if TYPE_CHECKING:
    from kernelevolve.config import Settings

_PREFIX = "KNOWLEDGE_LEVEL_"


def level_name(value: int) -> str:
    return pb.KnowledgeLevel.Name(value)[len(_PREFIX):].lower()  # type: ignore[arg-type]


def level_value(name: str) -> int:
    return pb.KnowledgeLevel.Value(_PREFIX + name.upper())


def doc_from_scored(hit: spb.ScoredDocument) -> RetrievedDoc:
    d = hit.document
    return RetrievedDoc(d.doc_id, level_name(d.level), d.title, d.text, hit.score, d.hardware_kind, d.op_family,
                        tuple(d.tags))


def hint_from_skill(s: pb.Skill) -> SkillHint:
    d = s.detail
    return SkillHint(s.skill_id, d.transformation.name, dict(d.transformation.params), d.op_family, s.hardware_kind,
                     d.gain or 1.0, d.gain_low or 1.0, d.gain_high or 1.0, s.text, d.status or "active",
                     d.precision or "strict")


class GrpcKnowledgeReader:
    name = "grpc"

    def __init__(self, target: str, *, token: str = "", timeout_s: float = 10.0) -> None:
        self._target = target
        self._channel = grpc.insecure_channel(target)
        self._stub = sgrpc.KnowledgeStub(self._channel)
        self._metadata = bearer_metadata(token)
        self._timeout_s = timeout_s

    def _call(self, method: str, request: object) -> object:
        try:
            return getattr(self._stub, method)(request, timeout=self._timeout_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            code, details = exc.code(), exc.details() or ""  # type: ignore[attr-defined]
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise DependencyTimeout(f"knowledge service at {self._target} did not answer in time") from exc
            if code == grpc.StatusCode.UNAVAILABLE:
                raise IndexUnavailable(f"knowledge service at {self._target} is unavailable: {details}") from exc
            raise error_from_status(code, details) from exc

    def retrieve(self, query: str, *, hardware_kind: str = "", op_family: str = "",
                 levels: tuple[str, ...] = (), limit: int = 5) -> list[RetrievedDoc]:
        if limit <= 0:
            return []
        merged: dict[str, RetrievedDoc] = {}
        # The API filters on one level at a time: several levels are one search each, merged.
        for level in levels or ("",):
            if level and level not in LEVELS:
                continue
            req = spb.SearchKnowledgeRequest(query=query, limit=limit, hardware_kind=hardware_kind,
                                             op_family=op_family, level=level_value(level) if level else 0)  # type: ignore[arg-type]
            resp = self._call("Search", req)
            for hit in resp.results:  # type: ignore[attr-defined]
                merged[hit.document.doc_id] = doc_from_scored(hit)
        return sorted(merged.values(), key=lambda d: (-d.score, d.doc_id))[:limit]

    def skills(self, *, hardware_kind: str, op_family: str = "", limit: int = 10,
               precision: str = "") -> list[SkillHint]:
        resp = self._call("ListSkills", spb.ListSkillsRequest(hardware_kind=hardware_kind, op_family=op_family,
                                                             limit=limit, precision=precision))
        return [hint_from_skill(s) for s in resp.skills]  # type: ignore[attr-defined]

    def close(self) -> None:
        self._channel.close()


def knowledge_reader(settings: Settings, target: str | None = None) -> GrpcKnowledgeReader:
    """The knowledge service's reader as the other services reach it: ``target``, else the
    configured learning target, else the local knowledge port; the first API token."""
    tokens = settings.auth.token_list
    return GrpcKnowledgeReader(target or settings.learning.knowledge_target
                               or f"127.0.0.1:{settings.grpc.knowledge_port}", token=tokens[0] if tokens else "")
