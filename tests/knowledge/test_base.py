"""KnowledgeBase on Qdrant local mode with the hash embedder: seeding, filtered search, skills."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.convert import measurement_from_result
from ke_knowledge.distill import SkillContext, distill_skill
from ke_knowledge.domain import Doc
from ke_knowledge.seed_loader import load_seed_documents
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.vector import HashEmbedder, MemoryIndex, QdrantIndex
from tests.knowledge.gpu_results import gpu_result


@pytest.fixture
async def kb(tmp_path: Path) -> AsyncIterator[KnowledgeBase]:
    index = QdrantIndex(path=tmp_path / "qdrant")
    base = KnowledgeBase(index, HashEmbedder(), "knowledge")
    await base.start()
    try:
        yield base
    finally:
        await index.close()


async def test_start_loads_seed_once(tmp_path: Path) -> None:
    seed = load_seed_documents()
    index = QdrantIndex(path=tmp_path / "qdrant")
    try:
        kb = KnowledgeBase(index, HashEmbedder(), "knowledge")
        await kb.start()
        assert await kb.count() == len(seed)
        await kb.start()  # a restart re-upserts by id: no duplicates
        assert await kb.count() == len(seed)
    finally:
        await index.close()


async def test_search_finds_the_relevant_pattern(kb: KnowledgeBase) -> None:
    results = await kb.search("online softmax running max", limit=3)
    assert results[0][0].doc_id == "op-softmax-online"
    assert [s for _, s in results] == sorted((s for _, s in results), reverse=True)


async def test_search_by_level(kb: KnowledgeBase) -> None:
    results = await kb.search("matmul tiling", limit=5, level="op_pattern")
    assert results and all(doc.level == "op_pattern" for doc, _ in results)
    assert results[0][0].doc_id == "op-matmul-epilogue"
    with pytest.raises(InvalidArgumentError):
        await kb.search("matmul", level="folklore")


async def test_search_by_hardware_includes_generic(kb: KnowledgeBase) -> None:
    results = await kb.search("memory bandwidth L2 cache", limit=30, hardware_kind="nvidia")
    kinds = {doc.hardware_kind for doc, _ in results}
    assert kinds == {"nvidia", ""}
    assert all(doc.hardware_kind != "cpu" for doc, _ in results)
    only = await kb.search("memory bandwidth", limit=30, hardware_kind="nvidia", include_generic=False)
    assert only and {doc.hardware_kind for doc, _ in only} == {"nvidia"}
    hw = await kb.search("interpreter timings", limit=2, level="hardware", hardware_kind="cpu")
    assert [doc.level for doc, _ in hw] == ["hardware", "hardware"]
    assert hw[0][0].doc_id == "hw-cpu-interpreter"


async def test_add_skill_is_searchable(kb: KnowledgeBase) -> None:
    parent, child = measurement_from_result(gpu_result("p", 1.6)), measurement_from_result(gpu_result("c9", 1.2))
    skill = distill_skill("s1", "c9", SkillContext("rmsnorm_rows", "reduction", "medium", "", "nvidia"),
                          "fuse_residual", {"BLOCK": "1024"}, parent, child)
    assert skill is not None
    doc = await kb.add_skill(skill)
    before = await kb.count()
    await kb.add_skill(skill)  # idempotent by skill id
    assert await kb.count() == before
    results = await kb.search("rmsnorm fuse residual", limit=1, level="skill", hardware_kind="nvidia")
    assert [(d.doc_id, d.text) for d, _ in results] == [(doc.doc_id, skill.text)]


async def test_custom_seed_and_memory_index() -> None:
    docs = [
        Doc("g1", "guidance", "Use masks", "Mask the tail of every load."),
        Doc("h1", "hardware", "Fake GPU", "Seven SMs and slow memory.", ("fake",), "fakegpu"),
    ]
    kb = KnowledgeBase(MemoryIndex(), HashEmbedder(dim=64), "k", seed_docs=docs)
    await kb.start()
    assert await kb.count() == 2
    results = await kb.search("how many SMs", hardware_kind="fakegpu", include_generic=False)
    assert [d for d, _ in results] == [docs[1]]
    with pytest.raises(InvalidArgumentError):
        await kb.search("   ")


async def test_op_family_filter_and_skill_listing(kb: KnowledgeBase) -> None:
    matmul = await kb.search("tile program tl.dot K loop", limit=30, level="op_pattern", op_family="matmul")
    assert matmul and {d.op_family for d, _ in matmul} <= {"matmul", ""}
    assert "ex-matmul" in {d.doc_id for d, _ in matmul}
    parent, child = measurement_from_result(gpu_result("p", 1.0)), measurement_from_result(gpu_result("c", 0.5))
    skill = distill_skill("s1", "c", SkillContext("gemm", "matmul", "large", "bfloat16", "nvidia"), "BLOCK_M",
                          {"value": "128"}, parent, child)
    assert skill is not None
    await kb.add_skill(skill)
    assert [s.skill_id for s in await kb.list_skills("nvidia", "matmul")] == [skill.skill_id]
    assert await kb.list_skills("amd") == []
    retired = await kb.retire_skill(skill.skill_id, "by hand")
    assert retired.status == "retired" and await kb.list_skills() == []
    assert (await kb.get_skill(skill.skill_id)).status_reason == "by hand"
    assert await kb.search("BLOCK_M gemm", level="skill") == []  # retired skills are not retrieved


async def test_start_without_reseed_seeds_only_an_empty_collection() -> None:
    docs = [Doc("g1", "guidance", "Use masks", "Mask the tail of every load.")]
    index = MemoryIndex()
    kb = KnowledgeBase(index, HashEmbedder(dim=64), "k", seed_docs=docs)
    await kb.start(reseed=False)
    assert await kb.count() == 1
    changed = KnowledgeBase(index, HashEmbedder(dim=64), "k", seed_docs=[*docs, Doc("g2", "guidance", "t", "x")])
    await changed.start(reseed=False)
    assert await changed.count() == 1  # left for the service's next start
    await changed.start()
    assert await changed.count() == 2
