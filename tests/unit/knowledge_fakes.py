"""The knowledge port's test double: documents and skills held in lists, ranked by word
overlap. Passes tests/contracts/test_knowledge_port.py with the real readers."""

from __future__ import annotations

import re
from collections.abc import Sequence

from kernelevolve.ports.knowledge import RetrievedDoc, SkillHint

_WORD = re.compile(r"[a-z0-9_]+")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


class FakeKnowledge:
    name = "fake"

    def __init__(self, docs: Sequence[RetrievedDoc] = (), skills: Sequence[SkillHint] = ()) -> None:
        self.docs, self.hints = list(docs), list(skills)
        self.calls = 0

    def retrieve(self, query: str, *, hardware_kind: str = "", op_family: str = "",
                 levels: tuple[str, ...] = (), limit: int = 5) -> list[RetrievedDoc]:
        self.calls += 1
        q = _words(query)
        out = []
        for d in self.docs:
            if hardware_kind and d.hardware_kind not in (hardware_kind, ""):
                continue
            if op_family and d.op_family not in (op_family, ""):
                continue
            if levels and d.level not in levels:
                continue
            words = _words(f"{d.title} {d.text} {' '.join(d.tags)}")
            score = len(q & words) / len(q | words) if q | words else 0.0
            out.append(RetrievedDoc(d.doc_id, d.level, d.title, d.text, score, d.hardware_kind, d.op_family, d.tags))
        out.sort(key=lambda d: (-d.score, d.doc_id))
        return out[:max(limit, 0)]

    def skills(self, *, hardware_kind: str, op_family: str = "", limit: int = 10,
               precision: str = "") -> list[SkillHint]:
        self.calls += 1
        rank = {"active": 0, "demoted": 1}
        found = [h for h in self.hints if h.status in rank and (not hardware_kind or h.hardware_kind == hardware_kind)
                 and (not op_family or h.op_family == op_family) and (not precision or h.precision == precision)]
        found.sort(key=lambda h: (rank[h.status], -h.gain_low, -h.gain, h.skill_id))
        return found[:limit] if limit > 0 else found
