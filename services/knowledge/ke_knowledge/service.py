"""Knowledge service: answers retrieval queries and distils skills from evaluations.

Listens to EvaluationCompleted. It remembers the timing of every correct candidate (a
child is evaluated after its parent, so the parent's timing is at hand); when a
correct child is CI-separated faster than its parent on real hardware it stores a
skill (level "skill") and publishes SkillDistilled. The same transformation measured
again in the same context confirms or demotes that skill, and an evaluation in an
environment that no longer matches a skill's provenance demotes it, then retires it.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import measurement_from_result, skill_to_proto
from ke_knowledge.distill import MIN_GAIN, Measurement, SkillContext, distill_skill, measure_gain, skill_id_for
from ke_knowledge.lifecycle import review_environment, review_measurement
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import get_record
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.op_family import classify_op_family
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

# Timings remembered for parents-to-come; a session evaluates at most a few hundred
# candidates, and a parent evaluated this long ago is rarely expanded again.
_REMEMBERED = 4096


def shape_class(baseline_ms: float) -> str:
    """The problem's size class, read from the eager baseline's time on the device: the
    same transformation pays differently on a launch-bound and a bandwidth-bound size."""
    if baseline_ms <= 0:
        return ""
    for limit, name in ((0.02, "tiny"), (0.2, "small"), (2.0, "medium")):
        if baseline_ms < limit:
            return name
    return "large"


def compact_diff(before: dict[str, str], after: dict[str, str]) -> tuple[str, str]:
    """The genome entries that differ, rendered "k=v, ...", parent side then child side."""
    keys = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return (", ".join(f"{k}={before.get(k, '')}" for k in keys), ", ".join(f"{k}={after.get(k, '')}" for k in keys))


class KnowledgeService:
    def __init__(self, bus: EventBus, subjects: Subjects, kb: KnowledgeBase, *, min_gain: float = MIN_GAIN) -> None:
        self._bus = bus
        self._subjects = subjects
        self.kb = kb
        self._min_gain = min_gain
        self._timings: OrderedDict[tuple[str, str], Measurement] = OrderedDict()
        self._reviewed_sessions: set[str] = set()

    async def subscribe(self) -> None:
        await self._bus.consume(self._subjects.evaluation(), "knowledge", self.on_evaluation)
        await self._bus.consume(self._subjects.retimed(), "knowledge-retimed", self.on_retimed)

    def _remember(self, sid: str, m: Measurement) -> None:
        self._timings[(sid, m.candidate_id)] = m
        while len(self._timings) > _REMEMBERED:
            self._timings.popitem(last=False)

    async def _review_environment(self, sid: str, result: pb.EvaluationResult) -> None:
        """Once per session: strike the skills of this hardware kind whose provenance this
        environment no longer matches."""
        if sid in self._reviewed_sessions or result.interpreted or not result.hardware.kind:
            return
        self._reviewed_sessions.add(sid)
        for skill in await self.kb.list_skills(result.hardware.kind):
            reviewed = review_environment(skill, dict(result.fingerprint), sid)
            if reviewed != skill:
                await self.kb.add_skill(reviewed)
                log.info("skill reviewed", extra={"session_id": sid, "skill_id": skill.skill_id,
                                                  "status": reviewed.status, "reason": reviewed.status_reason})

    async def on_retimed(self, env: ev.Envelope) -> None:
        """A re-check in a fresh worker: the first full verdict of a screened candidate is
        learned from as its evaluation would have been; a candidate with a full timing
        already remembered is not learned from twice."""
        msg = env.candidate_retimed
        if msg.result.tier == "screen" or (msg.session_id, msg.result.candidate_id) in self._timings:
            return
        await self._learn(msg.session_id, msg.result)

    async def on_evaluation(self, env: ev.Envelope) -> None:
        msg = env.evaluation_completed
        if msg.result.tier == "screen":
            return  # provisional (one input set, a short timing): never a lesson, nor a parent's timing
        await self._learn(msg.session_id, msg.result)

    async def _learn(self, sid: str, result: pb.EvaluationResult) -> None:
        if result.status != pb.EVALUATION_STATUS_CORRECT:
            return
        child = measurement_from_result(result)
        self._remember(sid, child)
        if child.interpreted:
            return  # interpreter timings teach nothing about speed, and judge no skill
        await self._review_environment(sid, result)
        cand = await get_record(self._bus, Keys.candidate(sid, result.candidate_id), pb.Candidate)
        if cand is None or not cand.parent_id or not cand.transformation.name:
            return
        parent = self._timings.get((sid, cand.parent_id))
        s = await get_record(self._bus, Keys.session(sid), pb.Session)
        if parent is None or s is None:
            return
        context = SkillContext(s.spec.name, classify_op_family(s.spec.source),
                               shape_class(result.baseline_timing.median_ms), cand.genome.get("dtype", ""),
                               result.hardware.kind or s.hardware.kind, s.precision or "default")
        tname, params = cand.transformation.name, dict(cand.transformation.params)
        existing = await self.kb.find_skill(skill_id_for(context, tname, params))
        if existing is not None:
            # A session never confirms (or refutes) its own lesson: that takes a later session.
            gain = measure_gain(parent, child) if existing.source_session_id != sid else None
            if gain is not None:
                reviewed = review_measurement(existing, gain, f"session {sid} candidate {cand.candidate_id}")
                await self.kb.add_skill(reviewed)
                log.info("skill re-measured", extra={"session_id": sid, "candidate_id": cand.candidate_id,
                                                     "skill_id": existing.skill_id, "status": reviewed.status})
            return
        pcand = await get_record(self._bus, Keys.candidate(sid, cand.parent_id), pb.Candidate)
        before, after = compact_diff(dict(pcand.genome) if pcand else {}, dict(cand.genome))
        skill = distill_skill(sid, cand.candidate_id, context, tname, params, parent, child,
                              min_gain=self._min_gain, before=before, after=after)
        if skill is None:
            return
        await self.kb.add_skill(skill)
        out = ev.SkillDistilled(session_id=sid, skill=skill_to_proto(skill))
        await self._bus.publish(self._subjects.skill(sid), envelope(sid, skill_distilled=out),
                                dedup_id=f"skill-{skill.skill_id}-{cand.candidate_id}")
        log.info("skill distilled", extra={"session_id": sid, "candidate_id": cand.candidate_id,
                                           "skill_id": skill.skill_id})
