"""The knowledge port in-process: a ``KnowledgeReader`` over a ``KnowledgeBase`` that
lives on an event loop of this process.

The port is blocking and the base is async: calls are handed to the base's loop and
waited for, so the reader must be called from another thread (a synthesizer's worker
thread, ``asyncio.to_thread``); called on the loop itself it would wait forever, and
refuses instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from ke_knowledge.base import KnowledgeBase
from ke_knowledge.domain import LEVELS, Skill
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.knowledge import RetrievedDoc, SkillHint

T = TypeVar("T")


def hint_of(skill: Skill) -> SkillHint:
    return SkillHint(skill.skill_id, skill.transformation, dict(skill.params), skill.op_family,
                     skill.hardware_kind, skill.gain, skill.gain_low, skill.gain_high, skill.text, skill.status,
                     skill.precision)


class LocalKnowledgeReader:
    name = "local"

    def __init__(self, kb: KnowledgeBase, loop: asyncio.AbstractEventLoop, *, timeout_s: float = 30.0) -> None:
        self._kb = kb
        self._loop = loop
        self._timeout_s = timeout_s

    def _wait(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            coro.close()
            raise InvalidArgumentError("LocalKnowledgeReader called on its knowledge base's own event loop; "
                                       "call it from a worker thread (asyncio.to_thread)")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self._timeout_s)

    async def _retrieve(self, query: str, hardware_kind: str, op_family: str, levels: tuple[str, ...],
                        limit: int) -> list[RetrievedDoc]:
        merged: dict[str, RetrievedDoc] = {}
        for level in levels or (None,):
            if level is not None and level not in LEVELS:
                continue
            for doc, score in await self._kb.search(query, limit, level, hardware_kind or None,
                                                    op_family=op_family or None):
                merged[doc.doc_id] = RetrievedDoc(doc.doc_id, doc.level, doc.title, doc.text, score,
                                                  doc.hardware_kind, doc.op_family, doc.tags)
        return sorted(merged.values(), key=lambda d: (-d.score, d.doc_id))[:limit]

    def retrieve(self, query: str, *, hardware_kind: str = "", op_family: str = "",
                 levels: tuple[str, ...] = (), limit: int = 5) -> list[RetrievedDoc]:
        if limit <= 0:
            return []
        return self._wait(self._retrieve(query, hardware_kind, op_family, levels, limit))

    def skills(self, *, hardware_kind: str, op_family: str = "", limit: int = 10,
               precision: str = "") -> list[SkillHint]:
        found = self._wait(self._kb.list_skills(hardware_kind, op_family, limit=limit, precision=precision))
        return [hint_of(s) for s in found]
