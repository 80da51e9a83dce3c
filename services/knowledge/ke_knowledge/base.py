"""The knowledge base: documents embedded into a vector index and retrieved by meaning.

Seed documents are (re)loaded on every ``start()``. Their ids are stable, so reloading
replaces rather than duplicates them, an empty collection gets the full seed, and a YAML
file added to the seed folder reaches an existing collection at the next start.
Distilled skills live in the same collection at level "skill" and are never touched by
seeding.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ke_knowledge.domain import Doc, Skill, check_level
from ke_knowledge.seed_loader import load_seed_documents
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.vector import Embedder, Hit, Point, VectorIndex

log = logging.getLogger(__name__)

# How many documents go through the embedder at once: bounds memory on big imports.
_BATCH = 64


def _payload(doc: Doc) -> dict[str, Any]:
    return {
        "doc_id": doc.doc_id,
        "level": doc.level,
        "title": doc.title,
        "text": doc.text,
        "tags": list(doc.tags),
        "hardware_kind": doc.hardware_kind,
    }


def _doc(hit: Hit) -> Doc:
    p = hit.payload
    return Doc(
        doc_id=str(p.get("doc_id", hit.id)),
        level=str(p["level"]),
        title=str(p.get("title", "")),
        text=str(p.get("text", "")),
        tags=tuple(p.get("tags") or ()),
        hardware_kind=str(p.get("hardware_kind", "")),
    )


class KnowledgeBase:
    def __init__(
        self,
        index: VectorIndex,
        embedder: Embedder,
        collection: str,
        seed_docs: Sequence[Doc] | None = None,
    ) -> None:
        """``seed_docs`` None means the packaged seed (``load_seed_documents()``); pass [] for none."""
        self._index = index
        self._embedder = embedder
        self._collection = collection
        self._seed_docs = seed_docs

    @property
    def collection(self) -> str:
        return self._collection

    async def start(self) -> None:
        """Create the collection if needed and load the seed documents into it."""
        await self._index.ensure_collection(self._collection, self._embedder.dim)
        seed = list(self._seed_docs) if self._seed_docs is not None else load_seed_documents()
        before = await self._index.count(self._collection)
        await self.add(seed)
        log.info(
            "knowledge base ready",
            extra={"collection": self._collection, "seed_docs": len(seed), "docs_before_seed": before},
        )

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        # Embedding is CPU work (MiniLM: tens of ms per batch); keep it off the event loop.
        return await asyncio.to_thread(self._embedder.embed, texts)

    async def add(self, docs: Sequence[Doc]) -> None:
        """Insert or replace documents by ``doc_id``."""
        docs = list(docs)
        for start in range(0, len(docs), _BATCH):
            batch = docs[start : start + _BATCH]
            vectors = await self._embed([d.embedding_text() for d in batch])
            points = [Point(d.doc_id, v, _payload(d)) for d, v in zip(batch, vectors, strict=True)]
            await self._index.upsert(self._collection, points)

    async def add_skill(self, skill: Skill) -> Doc:
        """Store a distilled skill as a level-"skill" document; returns that document."""
        doc = skill.to_doc()
        await self.add([doc])
        log.info(
            "skill stored",
            extra={
                "skill_id": skill.skill_id,
                "session_id": skill.source_session_id,
                "candidate_id": skill.source_candidate_id,
            },
        )
        return doc

    async def count(self) -> int:
        return await self._index.count(self._collection)

    async def search(
        self,
        query: str,
        limit: int = 5,
        level: str | None = None,
        hardware_kind: str | None = None,
        include_generic: bool = True,
    ) -> list[tuple[Doc, float]]:
        """Documents nearest in meaning to ``query``, best first, with cosine scores.

        ``hardware_kind`` keeps documents for that hardware and, unless
        ``include_generic`` is False, documents that apply to any hardware: advice on
        coalescing is as true on an H100 as anywhere.
        """
        if not query.strip():
            raise InvalidArgumentError("knowledge query is empty")
        if limit <= 0:
            return []
        filters: dict[str, str] = {}
        if level:
            filters["level"] = check_level(level)
        (vector,) = await self._embed([query])
        if not hardware_kind:
            hits = await self._index.search(self._collection, vector, limit, filters or None)
        else:
            kinds = [hardware_kind, ""] if include_generic else [hardware_kind]
            # The index matches fields exactly; "this kind or any" is two searches merged.
            results = await asyncio.gather(
                *(
                    self._index.search(self._collection, vector, limit, {**filters, "hardware_kind": k})
                    for k in kinds
                )
            )
            merged = {h.id: h for hits in results for h in hits}
            hits = sorted(merged.values(), key=lambda h: (-h.score, h.id))[:limit]
        return [(_doc(h), h.score) for h in hits]
