"""One contract suite for the knowledge port (``kernelevolve.ports.knowledge``), run against
every reader: in-process over a KnowledgeBase on Qdrant local mode, the gRPC client of
the real knowledge server, and the test double."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.domain import Doc, Skill
from ke_knowledge.grpc_server import KnowledgeServicer
from ke_knowledge.reader import LocalKnowledgeReader, hint_of
from kernelevolve.grpc_util import start_server
from kernelevolve.knowledge_client import GrpcKnowledgeReader
from kernelevolve.ports.knowledge import KnowledgeReader, NoKnowledge, RetrievedDoc
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from kernelevolve.vector import HashEmbedder, QdrantIndex
from tests.unit.knowledge_fakes import FakeKnowledge

DOCS = [
    Doc("g-coalesce", "guidance", "Coalesced loads", "Adjacent lanes read adjacent addresses for full bandwidth."),
    Doc("h-hopper", "hardware", "Hopper shared memory", "Each H100 SM has 228 KB of shared memory and TMA.",
        ("hopper",), "nvidia"),
    Doc("h-cdna", "hardware", "CDNA3 wavefront", "MI300X runs wavefronts of 64 lanes with 64 KB LDS per CU.",
        ("cdna3",), "amd"),
    Doc("p-matmul", "op_pattern", "Tiled matmul", "Each program computes a tile with tl.dot and a K loop.",
        ("matmul",), "", "matmul"),
    Doc("p-softmax", "op_pattern", "Row softmax", "One program per row: max, exp, sum, divide.",
        ("softmax",), "", "reduction"),
]


def _skill(sid: str, kind: str, family: str, name: str, gain_low: float, status: str = "active") -> Skill:
    return Skill(sid, f"{name} on {kind}", f"{name} paid", "spec", kind, "s0", "c0", name, {"value": "8"},
                 family, "small", "float16", gain_low + 0.1, gain_low, gain_low + 0.2, status=status)


SKILLS = [
    _skill("sk-warps", "nvidia", "reduction", "num_warps", 1.30),
    _skill("sk-block", "nvidia", "reduction", "BLOCK_SIZE", 1.40, "demoted"),
    _skill("sk-fusion", "nvidia", "reduction", "fusion", 1.90, "retired"),
    _skill("sk-amd", "amd", "reduction", "num_warps", 1.20),
    _skill("sk-mm", "nvidia", "matmul", "BLOCK_M", 1.25),
]


class _Loop:
    """An event loop on a thread of its own: the real readers block, their base is async."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()
        self.stack = AsyncExitStack()

    def run(self, coro):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)

    def close(self) -> None:
        self.run(self.stack.aclose())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


async def _base(stack: AsyncExitStack, folder: Path) -> KnowledgeBase:
    index = QdrantIndex(path=folder, shared=True)
    kb = KnowledgeBase(index, HashEmbedder(dim=256), "contract", seed_docs=DOCS)
    await kb.start()
    for s in SKILLS:
        await kb.add_skill(s)
    return kb


@pytest.fixture(params=["local", "grpc", "double"])
def reader(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[KnowledgeReader]:
    if request.param == "double":
        yield FakeKnowledge([RetrievedDoc(d.doc_id, d.level, d.title, d.text, 0.0, d.hardware_kind, d.op_family,
                                          d.tags) for d in DOCS], [hint_of(s) for s in SKILLS])
        return
    loop = _Loop()
    try:
        kb = loop.run(_base(loop.stack, tmp_path / "knowledge"))
        if request.param == "local":
            yield LocalKnowledgeReader(kb, loop.loop)
        else:
            async def serve() -> str:
                server = await start_server("127.0.0.1", 0, [
                    lambda s: sgrpc.add_KnowledgeServicer_to_server(KnowledgeServicer(kb), s)],
                    ["kernelevolve.v1.Knowledge"])
                loop.stack.push_async_callback(server.stop)
                return f"127.0.0.1:{server.port}"

            client = GrpcKnowledgeReader(loop.run(serve()))
            yield client
            client.close()
    finally:
        loop.close()


def test_ranks_by_similarity_to_the_query(reader: KnowledgeReader) -> None:
    docs = reader.retrieve("wavefronts of 64 lanes LDS", hardware_kind="amd", limit=3)
    assert docs[0].doc_id == "h-cdna"
    assert [d.score for d in docs] == sorted((d.score for d in docs), reverse=True)


def test_hardware_filter_keeps_that_hardware_and_generic_documents(reader: KnowledgeReader) -> None:
    docs = reader.retrieve("shared memory per SM", hardware_kind="nvidia", limit=10)
    kinds = {d.hardware_kind for d in docs}
    assert "h-hopper" in {d.doc_id for d in docs} and kinds <= {"nvidia", ""} and "" in kinds


def test_op_family_and_level_filters(reader: KnowledgeReader) -> None:
    docs = reader.retrieve("program per tile or row", op_family="matmul", levels=("op_pattern",), limit=10)
    assert [d.doc_id for d in docs] == ["p-matmul"]
    assert all(d.level == "op_pattern" for d in reader.retrieve("program", levels=("op_pattern",), limit=10))
    both = {d.level for d in reader.retrieve("memory", levels=("guidance", "hardware"), limit=10)}
    assert both <= {"guidance", "hardware"} and "skill" not in both


def test_limit(reader: KnowledgeReader) -> None:
    assert len(reader.retrieve("memory", limit=2)) == 2
    assert reader.retrieve("memory", limit=0) == []


def test_skills_active_then_demoted_best_gain_first_never_retired(reader: KnowledgeReader) -> None:
    hints = reader.skills(hardware_kind="nvidia", op_family="reduction")
    assert [(h.skill_id, h.status) for h in hints] == [("sk-warps", "active"), ("sk-block", "demoted")]
    top = hints[0]
    assert (top.transformation, top.params, top.op_family, top.hardware_kind) == (
        "num_warps", {"value": "8"}, "reduction", "nvidia")
    assert top.gain_low == pytest.approx(1.30) and top.gain == pytest.approx(1.40)
    assert top.gain_high == pytest.approx(1.50)
    assert [h.skill_id for h in reader.skills(hardware_kind="amd")] == ["sk-amd"]
    assert {h.skill_id for h in reader.skills(hardware_kind="nvidia")} == {"sk-warps", "sk-block", "sk-mm"}
    assert len(reader.skills(hardware_kind="nvidia", limit=1)) == 1


def test_no_knowledge_finds_nothing() -> None:
    none = NoKnowledge()
    assert none.retrieve("anything") == [] and none.skills(hardware_kind="nvidia") == []
