"""From a model's reply to a candidate source, or the reason it is refused.

Checked before an evaluation is spent: the code must parse, define ``ModelNew`` and pass
the evaluator's static policy (the same pure function, from ``kernelevolve.static_policy``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kernelevolve.static_policy import check_candidate

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)


@dataclass(frozen=True)
class Extracted:
    source: str
    rejected: str = ""  # "" = fit to evaluate


def extract_code(reply: str) -> str:
    """The largest python (or untagged) fenced block; the whole reply when there is none."""
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    code = [b for lang, b in blocks if lang in ("python", "py", "python3", "")]
    if code:
        return max(code, key=len).strip() + "\n"
    if blocks:
        return max((b for _, b in blocks), key=len).strip() + "\n"
    return reply.strip() + "\n"


def check_reply(reply: str) -> Extracted:
    if not reply.strip():
        return Extracted("", "empty reply")
    source = extract_code(reply)
    report = check_candidate(source)
    if report.ok:
        return Extracted(source)
    return Extracted(source, f"reply refused before evaluation: {report.reason}")
