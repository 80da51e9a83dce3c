"""Embedders: the hash embedder's guarantees, and MiniLM ranking text by meaning."""

from __future__ import annotations

import math

from kernelevolve.vector import HashEmbedder, MemoryIndex, MiniLMEmbedder, Point


def _cos(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_hash_embedder_is_deterministic_and_normalised() -> None:
    emb = HashEmbedder(dim=64)
    a, b, empty = emb.embed(["Softmax over rows", "softmax over rows", ""])
    assert len(a) == 64 and a == b  # case-insensitive, same across calls
    assert math.isclose(math.sqrt(sum(x * x for x in a)), 1.0, rel_tol=1e-9)
    assert math.isclose(math.sqrt(sum(x * x for x in empty)), 1.0, rel_tol=1e-9)
    assert HashEmbedder(dim=64).embed(["softmax over rows"])[0] == a


def test_hash_embedder_shares_words() -> None:
    emb = HashEmbedder()
    query, near, far = emb.embed(
        ["row softmax kernel", "online softmax over each row", "tiled matmul with bias"]
    )
    assert _cos(query, near) > _cos(query, far)


async def test_minilm_ranks_by_meaning() -> None:
    # Loads the real model (about 7 s on 2 CPU cores, under the 15 s bar for "slow").
    emb = MiniLMEmbedder()
    assert emb.dim == 384
    docs = {
        "softmax": "Numerically stable softmax: subtract the running maximum of each row, exponentiate, "
        "divide by the row sum; one program per row keeps the row in registers.",
        "matmul": "Tiled matrix multiplication: each program computes a BLOCK_M x BLOCK_N tile, looping "
        "over K and accumulating in fp32 with tl.dot.",
    }
    vectors = emb.embed(list(docs.values()))
    assert all(math.isclose(math.sqrt(sum(x * x for x in v)), 1.0, rel_tol=1e-4) for v in vectors)
    index = MemoryIndex()
    await index.ensure_collection("k", emb.dim)
    await index.upsert("k", [Point(k, v) for k, v in zip(docs, vectors, strict=True)])
    (query,) = emb.embed(["softmax over rows"])
    hits = await index.search("k", query, limit=2)
    assert [h.id for h in hits] == ["softmax", "matmul"]
    assert hits[0].score - hits[1].score > 0.1
