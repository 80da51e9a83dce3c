"""gRPC servicer of the knowledge service: translation only."""

from __future__ import annotations

import grpc

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import doc_from_proto, doc_to_proto, level_from_proto, skill_to_proto
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


class KnowledgeServicer(sgrpc.KnowledgeServicer):
    def __init__(self, kb: KnowledgeBase) -> None:
        self._kb = kb

    async def AddDocuments(self, request: spb.AddDocumentsRequest,
                           context: grpc.aio.ServicerContext) -> spb.AddDocumentsResponse:
        docs = [doc_from_proto(d) for d in request.documents]
        await self._kb.add(docs)
        return spb.AddDocumentsResponse(added=len(docs))

    async def Search(self, request: spb.SearchKnowledgeRequest,
                     context: grpc.aio.ServicerContext) -> spb.SearchKnowledgeResponse:
        hits = await self._kb.search(request.query, limit=request.limit or 5, level=level_from_proto(request.level),
                                     hardware_kind=request.hardware_kind or None,
                                     op_family=request.op_family or None)
        return spb.SearchKnowledgeResponse(results=[spb.ScoredDocument(document=doc_to_proto(d), score=s)
                                                    for d, s in hits])

    async def ListSkills(self, request: spb.ListSkillsRequest,
                         context: grpc.aio.ServicerContext) -> spb.ListSkillsResponse:
        skills = await self._kb.list_skills(request.hardware_kind, request.op_family,
                                            include_retired=request.include_retired, limit=request.limit,
                                            precision=request.precision)
        return spb.ListSkillsResponse(skills=[skill_to_proto(s) for s in skills])

    async def GetSkill(self, request: spb.SkillRef, context: grpc.aio.ServicerContext) -> pb.Skill:
        return skill_to_proto(await self._kb.get_skill(request.skill_id))

    async def RetireSkill(self, request: spb.RetireSkillRequest, context: grpc.aio.ServicerContext) -> pb.Skill:
        return skill_to_proto(await self._kb.retire_skill(request.skill_id, request.reason))
