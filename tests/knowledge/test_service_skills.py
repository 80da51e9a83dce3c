"""The knowledge service distils a skill from a CI-separated win timed on real hardware,
never from interpreter timings, and re-judges stored skills as later sessions measure:
the real service over the in-memory bus, a real knowledge base (memory index, hashing
embedder), results as a GPU evaluator publishes them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.service import KnowledgeService, compact_diff, shape_class
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.spec import make_spec
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.vector import HashEmbedder, MemoryIndex
from tests.knowledge.gpu_results import H100, gpu_result

S = Subjects("ke")
SPEC = ("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n"
        "        return torch.softmax(x, dim=-1)\ndef get_inputs():\n    return [torch.randn(8, 37)]\n"
        "def get_init_inputs():\n    return []\n")
STEP = pb.Transformation(name="num_warps", params={"group": "g0", "value": "8"})


@dataclass
class World:
    bus: MemoryBus
    kb: KnowledgeBase
    published: list[ev.Envelope]

    async def session(self, sid: str, kind: str = "nvidia") -> None:
        s = pb.Session(session_id=sid, spec=make_spec("softmax_rows", SPEC), hardware=pb.HardwareTarget(kind=kind))
        await self.bus.kv_put(Keys.session(sid), s.SerializeToString())

    async def step(self, sid: str, parent: pb.EvaluationResult, child: pb.EvaluationResult) -> None:
        """A parent evaluated, then a child derived from it by STEP, as a session runs them."""
        pc = pb.Candidate(candidate_id=parent.candidate_id, session_id=sid, genome={"g0.num_warps": "4"})
        cc = pb.Candidate(candidate_id=child.candidate_id, session_id=sid, parent_id=parent.candidate_id,
                          transformation=STEP, genome={"g0.num_warps": "8"})
        for c in (pc, cc):
            await self.bus.kv_put(Keys.candidate(sid, c.candidate_id), c.SerializeToString())
        for r in (parent, child):
            await self.bus.publish(S.evaluation(sid), envelope(sid, evaluation_completed=ev.EvaluationCompleted(
                session_id=sid, result=r)))
        await asyncio.sleep(0.2)  # both handled by then (the memory bus delivers in order)


@pytest.fixture
async def world() -> AsyncIterator[World]:
    bus = MemoryBus(redeliver_delay_s=0.01)
    kb = KnowledgeBase(MemoryIndex(), HashEmbedder(dim=64), "k", seed_docs=[])
    await kb.start()
    await KnowledgeService(bus, S, kb).subscribe()
    published: list[ev.Envelope] = []

    async def follow() -> None:
        async for env in bus.watch(S.skill()):
            published.append(env)

    task = asyncio.create_task(follow())
    yield World(bus, kb, published)
    task.cancel()
    await bus.close()


async def test_separated_gpu_win_is_distilled_published_and_stored(world: World) -> None:
    await world.session("s1")
    await world.step("s1", gpu_result("p", 0.150), gpu_result("c", 0.100))
    assert len(world.published) == 1
    msg = world.published[0].skill_distilled.skill
    assert msg.detail.transformation.name == "num_warps" and msg.detail.op_family == "reduction"
    assert msg.detail.gain == pytest.approx(1.5) and msg.detail.gain_low > 1.0
    assert msg.detail.provenance["device_name"] == H100["device_name"]
    assert (msg.detail.before, msg.detail.after) == ("g0.num_warps=4", "g0.num_warps=8")
    (stored,) = await world.kb.list_skills("nvidia", "reduction")
    assert stored.skill_id == msg.skill_id and stored.status == "active"
    found = await world.kb.search("num_warps softmax", limit=3, level="skill", op_family="reduction")
    assert [d.doc_id for d, _ in found] == [msg.skill_id]


@pytest.mark.parametrize("case", ["interpreted", "overlapping"])
async def test_no_skill_from_interpreter_or_overlapping_timings(world: World, case: str) -> None:
    await world.session("s1", "cpu" if case == "interpreted" else "nvidia")
    if case == "interpreted":
        cpu = {"device": "cpu", "triton_interpret": "1"}
        parent = gpu_result("p", 40.0, fingerprint=cpu, kind="cpu", interpreted=True)
        child = gpu_result("c", 4.0, fingerprint=cpu, kind="cpu", interpreted=True)
    else:
        parent, child = gpu_result("p", 1.0, spread=0.1), gpu_result("c", 0.9, spread=0.1)
    await world.step("s1", parent, child)
    assert world.published == []
    assert await world.kb.list_skills(include_retired=True) == []


async def test_later_sessions_demote_then_retire_a_skill_that_does_not_reproduce(world: World) -> None:
    await world.session("s1")
    await world.step("s1", gpu_result("p", 0.150), gpu_result("c", 0.100))
    for sid, status in (("s2", "demoted"), ("s3", "retired")):
        await world.session(sid)
        await world.step(sid, gpu_result(f"{sid}-p", 0.100), gpu_result(f"{sid}-c", 0.101))
        (skill,) = await world.kb.list_skills(include_retired=True)
        assert skill.status == status and f"session {sid}" in skill.status_reason
    assert await world.kb.list_skills() == []  # retired skills are kept but not offered
    assert len(world.published) == 1


async def test_new_environment_demotes_skills_of_its_hardware(world: World) -> None:
    await world.session("s1")
    await world.step("s1", gpu_result("p", 0.150), gpu_result("c", 0.100))
    newer = dict(H100, triton="3.3.0")
    await world.session("s2")
    # another size class: a different context, so only the environment review touches the skill
    await world.step("s2", gpu_result("q", 1.0, fingerprint=newer, baseline_ms=0.1),
                     gpu_result("d", 1.0, fingerprint=newer, baseline_ms=0.1))
    (skill,) = await world.kb.list_skills()
    assert skill.status == "demoted" and "triton changed" in skill.status_reason


def test_shape_class_and_compact_diff() -> None:
    assert [shape_class(ms) for ms in (0.0, 0.01, 0.1, 1.0, 10.0)] == ["", "tiny", "small", "medium", "large"]
    assert compact_diff({"a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "x"}) == ("b=2, c=", "b=3, c=x")


async def test_a_screened_win_is_never_a_lesson_until_its_full_recheck(world: World) -> None:
    """A screen (one input set, a short timing) is provisional: nothing is distilled from it
    (nor does it stand as a parent's timing); the candidate's full re-check is learned from."""
    await world.session("s9")
    screened = gpu_result("c", 0.100)
    screened.tier = "screen"
    await world.step("s9", gpu_result("p", 0.150), screened)
    assert world.published == []
    full = gpu_result("c", 0.100)
    full.tier = "full"
    await world.bus.publish(S.retimed("s9"), envelope("s9", candidate_retimed=ev.CandidateRetimed(
        session_id="s9", result=full)))
    await asyncio.sleep(0.2)
    assert len(world.published) == 1 and world.published[0].skill_distilled.skill.detail.gain == pytest.approx(1.5)
    # the same re-check again (a redelivery) teaches nothing twice
    await world.bus.publish(S.retimed("s9"), envelope("s9", candidate_retimed=ev.CandidateRetimed(
        session_id="s9", result=full)))
    await asyncio.sleep(0.2)
    assert len(world.published) == 1
