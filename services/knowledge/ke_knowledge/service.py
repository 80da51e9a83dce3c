"""Knowledge service: answers retrieval queries and distils skills from evaluations.

Listens to EvaluationCompleted; when a correct child beats its parent, stores a skill
(level "skill") in the knowledge base and publishes SkillDistilled.
"""

from __future__ import annotations

import logging

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import skill_to_proto
from ke_knowledge.distill import distill_skill
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_node, get_record
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

log = logging.getLogger(__name__)


class KnowledgeService:
    def __init__(self, bus: EventBus, subjects: Subjects, kb: KnowledgeBase) -> None:
        self._bus = bus
        self._subjects = subjects
        self.kb = kb

    async def subscribe(self) -> None:
        await self._bus.consume(self._subjects.evaluation(), "knowledge", self.on_evaluation)

    async def on_evaluation(self, env: ev.Envelope) -> None:
        msg = env.evaluation_completed
        result, sid = msg.result, msg.session_id
        if result.status != pb.EVALUATION_STATUS_CORRECT:
            return
        cand = await get_record(self._bus, Keys.candidate(sid, result.candidate_id), pb.Candidate)
        if cand is None or not cand.parent_id:
            return
        pnode = await get_node(self._bus, sid, cand.parent_id)
        s = await get_record(self._bus, Keys.session(sid), pb.Session)
        if pnode is None or s is None:
            return
        skill = distill_skill(sid, cand.candidate_id, s.spec.name, cand.transformation.name,
                              dict(cand.transformation.params), result.speedup, pnode.fitness,
                              result.hardware.kind or s.hardware.kind, interpreted=result.interpreted)
        if skill is None:
            return
        await self.kb.add_skill(skill)
        out = ev.SkillDistilled(session_id=sid, skill=skill_to_proto(skill))
        await self._bus.publish(self._subjects.skill(sid), envelope(sid, skill_distilled=out),
                                dedup_id=f"skill-{skill.skill_id}")
        log.info("skill distilled", extra={"session_id": sid, "candidate_id": cand.candidate_id,
                                           "skill_id": skill.skill_id})
