"""The knowledge service distils a skill from a clear win timed on real hardware, and
never from interpreter timings: the real service over the in-memory bus, a real
knowledge base (memory index, hashing embedder)."""

from __future__ import annotations

import asyncio

import pytest

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.service import KnowledgeService
from kernelevolve.bus.envelope import envelope
from kernelevolve.bus.memory import MemoryBus
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.spec import make_spec
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.vector import HashEmbedder, MemoryIndex

S = Subjects("ke")
SPEC = "import torch\nclass Model(torch.nn.Module):\n    pass\ndef get_inputs():\n    return []\n" \
       "def get_init_inputs():\n    return []\n"


@pytest.mark.parametrize(("interpreted", "kind", "skills"), [(False, "nvidia", 1), (True, "cpu", 0)])
async def test_only_real_hardware_timings_teach_a_skill(interpreted: bool, kind: str, skills: int) -> None:
    bus = MemoryBus(redeliver_delay_s=0.01)
    kb = KnowledgeBase(MemoryIndex(), HashEmbedder(dim=64), "k", seed_docs=[])
    await kb.start()
    await KnowledgeService(bus, S, kb).subscribe()
    sid = "s1"
    session = pb.Session(session_id=sid, spec=make_spec("softmax_rows", SPEC), hardware=pb.HardwareTarget(kind=kind))
    await bus.kv_put(Keys.session(sid), session.SerializeToString())
    await bus.kv_put(Keys.node(sid, "p"), pb.Node(node_id="p", evaluated=True, fitness=1.0,
                                                   status=pb.EVALUATION_STATUS_CORRECT).SerializeToString())
    child = pb.Candidate(candidate_id="c", session_id=sid, parent_id="p",
                         transformation=pb.Transformation(name="block_size", params={"BLOCK": "2048"}))
    await bus.kv_put(Keys.candidate(sid, "c"), child.SerializeToString())
    result = pb.EvaluationResult(candidate_id="c", status=pb.EVALUATION_STATUS_CORRECT, speedup=3.0,
                                 interpreted=interpreted, hardware=pb.HardwareTarget(kind=kind))
    await bus.publish(S.evaluation(sid), envelope(sid, evaluation_completed=ev.EvaluationCompleted(
        session_id=sid, result=result)))
    published: list[ev.Envelope] = []

    async def follow() -> None:
        async for env in bus.watch(S.skill(sid)):
            published.append(env)

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.3)  # the evaluation is handled (or ignored) by then
    task.cancel()
    assert len(published) == skills
    found = await kb.search("block_size softmax_rows", limit=5, level="skill")
    assert len(found) == skills
    await bus.close()
