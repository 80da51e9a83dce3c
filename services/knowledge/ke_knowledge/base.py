"""The knowledge base: documents embedded into a vector index and retrieved by meaning.

Seed documents are (re)loaded on every ``start()``. Their ids are stable, so reloading
replaces rather than duplicates them, an empty collection gets the full seed, and a YAML
file added to the seed folder reaches an existing collection at the next start.
Distilled skills live in the same collection at level "skill" and are never touched by
seeding; each carries its full record (``Skill.to_payload``) in the payload field
"skill", so listing and reviewing skills needs no second store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ke_knowledge.domain import Doc, Skill, check_level
from ke_knowledge.lifecycle import retire
from ke_knowledge.seed_loader import load_seed_documents
from kernelevolve.errors import InvalidArgumentError, NotFoundError
from kernelevolve.vector import Embedder, Hit, Point, VectorIndex

log = logging.getLogger(__name__)

# How many documents go through the embedder at once: bounds memory on big imports.
_BATCH = 64
# Listing skills is a filtered search whose limit exceeds any skill count: the vector
# port ranks but never drops a point that passes the filters.
_ALL = 100_000


def _payload(doc: Doc, skill: Skill | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "doc_id": doc.doc_id,
        "level": doc.level,
        "title": doc.title,
        "text": doc.text,
        "tags": list(doc.tags),
        "hardware_kind": doc.hardware_kind,
        "op_family": doc.op_family,
    }
    if skill is not None:
        out["skill"] = skill.to_payload()
        out["skill_status"] = skill.status
    return out


def _retired(hit: Hit) -> bool:
    return hit.payload.get("skill_status") == "retired"


def _doc(hit: Hit) -> Doc:
    p = hit.payload
    return Doc(
        doc_id=str(p.get("doc_id", hit.id)),
        level=str(p["level"]),
        title=str(p.get("title", "")),
        text=str(p.get("text", "")),
        tags=tuple(p.get("tags") or ()),
        hardware_kind=str(p.get("hardware_kind", "")),
        op_family=str(p.get("op_family", "") or ""),
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

    async def start(self, *, reseed: bool = True) -> None:
        """Create the collection if needed and load the seed documents into it.

        ``reseed`` False loads them only into an empty collection: a short-lived client
        (a CLI command) leaves refreshing the seed to the service, which re-embeds it
        on every start (seconds with MiniLM)."""
        await self._index.ensure_collection(self._collection, self._embedder.dim)
        seed = list(self._seed_docs) if self._seed_docs is not None else load_seed_documents()
        before = await self._index.count(self._collection)
        if reseed or before == 0:
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
        """Store (or replace) a skill as a level-"skill" document; returns that document."""
        doc = skill.to_doc()
        (vector,) = await self._embed([doc.embedding_text()])
        await self._index.upsert(self._collection, [Point(doc.doc_id, vector, _payload(doc, skill))])
        log.info(
            "skill stored",
            extra={
                "skill_id": skill.skill_id,
                "session_id": skill.source_session_id,
                "candidate_id": skill.source_candidate_id,
                "status": skill.status,
            },
        )
        return doc

    async def _skill_hits(self, filters: dict[str, str], limit: int = _ALL) -> list[Hit]:
        # Any query vector will do: the filter decides membership, the order is re-made below.
        (vector,) = await self._embed(["skill"])
        return await self._index.search(self._collection, vector, limit, {"level": "skill", **filters})

    async def find_skill(self, skill_id: str) -> Skill | None:
        hits = await self._skill_hits({"doc_id": skill_id}, 1)
        return Skill.from_payload(hits[0].payload["skill"]) if hits and "skill" in hits[0].payload else None

    async def get_skill(self, skill_id: str) -> Skill:
        skill = await self.find_skill(skill_id)
        if skill is None:
            raise NotFoundError(f"no skill {skill_id!r} in the knowledge base")
        return skill

    async def list_skills(self, hardware_kind: str = "", op_family: str = "", *, include_retired: bool = False,
                          limit: int = 0, precision: str = "") -> list[Skill]:
        """Skills, best measured gain first (active before demoted); ``limit`` 0 = all;
        ``precision``: only those timed under that contract (empty: any)."""
        filters = {k: v for k, v in (("hardware_kind", hardware_kind), ("op_family", op_family)) if v}
        skills = [Skill.from_payload(h.payload["skill"]) for h in await self._skill_hits(filters)
                  if "skill" in h.payload and (include_retired or not _retired(h))]
        if precision:  # filtered here: skills stored before contracts have no payload field to match
            skills = [s for s in skills if s.precision == precision]
        rank = {"active": 0, "demoted": 1, "retired": 2}
        skills.sort(key=lambda s: (rank[s.status], -s.gain_low, -s.gain, s.skill_id))
        return skills[:limit] if limit > 0 else skills

    async def retire_skill(self, skill_id: str, reason: str) -> Skill:
        skill = retire(await self.get_skill(skill_id), reason)
        await self.add_skill(skill)
        return skill

    async def count(self) -> int:
        return await self._index.count(self._collection)

    async def search(
        self,
        query: str,
        limit: int = 5,
        level: str | None = None,
        hardware_kind: str | None = None,
        include_generic: bool = True,
        op_family: str | None = None,
    ) -> list[tuple[Doc, float]]:
        """Documents nearest in meaning to ``query``, best first, with cosine scores.

        ``hardware_kind`` keeps documents for that hardware and, unless
        ``include_generic`` is False, documents that apply to any hardware: advice on
        coalescing is as true on an H100 as anywhere. ``op_family`` filters the same
        way. Retired skills are never returned.
        """
        if not query.strip():
            raise InvalidArgumentError("knowledge query is empty")
        if limit <= 0:
            return []
        filters: dict[str, str] = {}
        if level:
            filters["level"] = check_level(level)
        (vector,) = await self._embed([query])
        kinds = ([hardware_kind, ""] if include_generic else [hardware_kind]) if hardware_kind else [None]
        families = ([op_family, ""] if include_generic else [op_family]) if op_family else [None]
        # The index matches fields exactly; "this kind or any" is one search per combination,
        # merged. Extra hits make room for retired skills dropped afterwards.
        combos = [{**filters, **({"hardware_kind": k} if k is not None else {}),
                   **({"op_family": f} if f is not None else {})} for k in kinds for f in families]
        results = await asyncio.gather(
            *(self._index.search(self._collection, vector, limit * 2, c or None) for c in combos))
        merged = {h.id: h for hits in results for h in hits if not _retired(h)}
        hits = sorted(merged.values(), key=lambda h: (-h.score, h.id))[:limit]
        return [(_doc(h), h.score) for h in hits]
