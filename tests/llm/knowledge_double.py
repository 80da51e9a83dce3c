"""A KnowledgeReader double: fixed documents and skills, filtered like the real one,
recording the queries it got."""

from __future__ import annotations

from dataclasses import dataclass, field

from kernelevolve.ports.knowledge import RetrievedDoc, SkillHint


@dataclass
class StaticKnowledge:
    docs: list[RetrievedDoc] = field(default_factory=list)
    hints: list[SkillHint] = field(default_factory=list)
    queries: list[tuple[str, str, str]] = field(default_factory=list)

    def retrieve(self, query: str, *, hardware_kind: str = "", op_family: str = "",
                 levels: tuple[str, ...] = (), limit: int = 5) -> list[RetrievedDoc]:
        self.queries.append((query, hardware_kind, op_family))
        return [d for d in self.docs if d.hardware_kind in ("", hardware_kind)
                and d.op_family in ("", op_family) and (not levels or d.level in levels)][:limit]

    def skills(self, *, hardware_kind: str, op_family: str = "", limit: int = 10,
               precision: str = "") -> list[SkillHint]:
        return [s for s in self.hints if s.hardware_kind in ("", hardware_kind)
                and (not op_family or s.op_family in ("", op_family))
                and (not precision or s.precision == precision)][:limit]


def sample_knowledge() -> StaticKnowledge:
    return StaticKnowledge(
        docs=[RetrievedDoc("doc-masking-17", "guidance", "Masked tails",
                           "Mask the last block: offs < n, other=0.0 on loads.", 0.9),
              RetrievedDoc("doc-cpu-interp-3", "hardware", "Triton interpreter on CPU",
                           "The interpreter runs each program serially; prefer few large blocks.", 0.8,
                           hardware_kind="cpu"),
              RetrievedDoc("doc-h100-tma-9", "hardware", "H100 TMA", "Use TMA descriptors.", 0.7,
                           hardware_kind="h100")],
        hints=[SkillHint("skill-fuse-42", "fuse_epilogue", {"ops": "relu,mul,add"}, "pointwise", "cpu",
                         gain=1.8, gain_low=1.5, gain_high=2.1, text="fuse the epilogue into one pass")],
    )
