"""One contract for every VectorIndex adapter: Qdrant local mode and the in-memory double."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kernelevolve.config import KnowledgeSettings
from kernelevolve.errors import ConfigError, NotFoundError
from kernelevolve.vector import (
    HashEmbedder,
    MemoryIndex,
    MiniLMEmbedder,
    Point,
    QdrantIndex,
    VectorIndex,
    embedder_from_settings,
    index_from_settings,
)

DIM = 4


@pytest.fixture(params=["memory", "qdrant-local"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    idx: VectorIndex = MemoryIndex() if request.param == "memory" else QdrantIndex(path=tmp_path / "qdrant")
    await idx.ensure_collection("docs", DIM)
    try:
        yield idx
    finally:
        await idx.close()


POINTS = [
    Point("x-axis", [1.0, 0.0, 0.0, 0.0], {"level": "guidance", "tags": ["memory", "coalescing"]}),
    Point(
        "mostly-x", [0.9, 0.1, 0.0, 0.0], {"level": "hardware", "hardware_kind": "nvidia", "tags": ["memory"]}
    ),
    Point("diagonal", [1.0, 1.0, 0.0, 0.0], {"level": "guidance", "tags": []}),
    Point("y-axis", [0.0, 1.0, 0.0, 0.0], {"level": "op_pattern", "tags": ["reduction"]}),
    Point("opposite", [-1.0, 0.0, 0.0, 0.0], {"level": "guidance", "tags": []}),
]


async def test_search_ranks_by_cosine(index: VectorIndex) -> None:
    await index.upsert("docs", POINTS)
    hits = await index.search("docs", [1.0, 0.0, 0.0, 0.0], limit=3)
    assert [h.id for h in hits] == ["x-axis", "mostly-x", "diagonal"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[2].score == pytest.approx(2**-0.5, abs=1e-5)
    assert hits[0].payload == {"level": "guidance", "tags": ["memory", "coalescing"]}
    everything = await index.search("docs", [1.0, 0.0, 0.0, 0.0], limit=10)
    assert [h.id for h in everything][-1] == "opposite"
    assert len(everything) == len(POINTS)


async def test_filters_are_exact_matches(index: VectorIndex) -> None:
    await index.upsert("docs", POINTS)
    query = [1.0, 0.0, 0.0, 0.0]
    guidance = await index.search("docs", query, limit=10, filters={"level": "guidance"})
    assert [h.id for h in guidance] == ["x-axis", "diagonal", "opposite"]
    nvidia_hw = {"level": "hardware", "hardware_kind": "nvidia"}
    both = await index.search("docs", query, limit=10, filters=nvidia_hw)
    assert [h.id for h in both] == ["mostly-x"]
    assert await index.search("docs", query, limit=10, filters={"level": "skill"}) == []
    assert await index.search("docs", query, limit=10, filters={"hardware_kind": "cpu"}) == []


async def test_list_payload_matches_when_it_contains_the_value(index: VectorIndex) -> None:
    await index.upsert("docs", POINTS)
    hits = await index.search("docs", [1.0, 0.0, 0.0, 0.0], limit=10, filters={"tags": "memory"})
    assert [h.id for h in hits] == ["x-axis", "mostly-x"]


async def test_upsert_same_id_replaces(index: VectorIndex) -> None:
    await index.upsert("docs", POINTS)
    await index.upsert("docs", [Point("x-axis", [0.0, 0.0, 1.0, 0.0], {"level": "skill"})])
    assert await index.count("docs") == len(POINTS)
    hits = await index.search("docs", [0.0, 0.0, 1.0, 0.0], limit=1)
    assert hits[0].id == "x-axis" and hits[0].payload == {"level": "skill"}
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)


async def test_count_and_collections(index: VectorIndex) -> None:
    assert await index.count("docs") == 0
    await index.upsert("docs", POINTS[:2])
    await index.upsert("docs", [])
    assert await index.count("docs") == 2
    await index.ensure_collection("docs", DIM)  # idempotent; keeps the points
    assert await index.count("docs") == 2
    await index.ensure_collection("other", DIM)
    assert await index.count("other") == 0
    with pytest.raises(ConfigError):
        await index.ensure_collection("docs", DIM + 1)
    with pytest.raises(NotFoundError):
        await index.count("missing")
    with pytest.raises(NotFoundError):
        await index.search("missing", [1.0, 0.0, 0.0, 0.0], limit=1)


async def test_qdrant_local_persists_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "qdrant"
    first = QdrantIndex(path=path)
    await first.ensure_collection("docs", DIM)
    await first.upsert("docs", POINTS)
    await first.close()

    second = QdrantIndex(path=path)
    try:
        await second.ensure_collection("docs", DIM)
        assert await second.count("docs") == len(POINTS)
        hits = await second.search("docs", [0.0, 1.0, 0.0, 0.0], limit=1, filters={"level": "op_pattern"})
        assert [h.id for h in hits] == ["y-axis"]
    finally:
        await second.close()


def test_factories(tmp_path: Path) -> None:
    assert repr(index_from_settings(KnowledgeSettings(path=str(tmp_path)))).startswith("QdrantIndex(path=")
    assert "url=" in repr(index_from_settings(KnowledgeSettings(url="http://127.0.0.1:6333")))
    with pytest.raises(ConfigError):
        index_from_settings(KnowledgeSettings())
    assert isinstance(embedder_from_settings(KnowledgeSettings(embedder="hash")), HashEmbedder)
    assert isinstance(embedder_from_settings(KnowledgeSettings(embedder="minilm")), MiniLMEmbedder)
    with pytest.raises(ConfigError):
        embedder_from_settings(KnowledgeSettings(embedder="word2vec"))
