"""Context memory: what evidence goes into a prompt, within a token budget.

Sections are ranked by priority (lower goes in first); required sections always go in,
trimmed when even they exceed the budget; an optional section that does not fit whole
is trimmed to what is left when that is worth it, else dropped. Sizes are counted in
tokens (``tokens.count_tokens``), never characters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ke_synthesizer.llm.tokens import count_tokens, trim_to_tokens

# An optional section trimmed below this many tokens says too little to be worth its header.
_MIN_USEFUL = 60


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    body: str
    priority: int = 50
    required: bool = False
    # Which end survives trimming: "head" for sources and documents, "tail" for error
    # text (a traceback's last lines name the error).
    keep: str = "head"

    def render(self) -> str:
        return f"## {self.title}\n\n{self.body.strip()}\n"


@dataclass(frozen=True)
class Fitted:
    sections: tuple[Section, ...]
    dropped: tuple[str, ...]
    tokens: int

    def text(self) -> str:
        return "\n".join(s.render() for s in self.sections)


def fit(sections: list[Section], budget: int) -> Fitted:
    """Choose and trim sections to fit ``budget`` tokens; keep the callers' order in the text."""
    order = {id(s): i for i, s in enumerate(sections)}
    ranked = sorted(sections, key=lambda s: (not s.required, s.priority, order[id(s)]))
    chosen: list[Section] = []
    dropped: list[str] = []
    used = 0
    for s in ranked:
        cost = count_tokens(s.render())
        left = budget - used
        if cost <= left:
            chosen.append(s)
            used += cost
            continue
        room = left - count_tokens(f"## {s.title}\n\n\n") - 2
        if s.required or room >= _MIN_USEFUL:
            t = replace(s, body=trim_to_tokens(s.body, max(room, _MIN_USEFUL), keep=s.keep))
            chosen.append(t)
            used += count_tokens(t.render())
        else:
            dropped.append(s.key)
    position = {s.key: i for i, s in enumerate(sections)}
    chosen.sort(key=lambda s: position[s.key])
    return Fitted(tuple(chosen), tuple(dropped), used)
