"""Skills as transformation weights: which (knob, value) edges distilled skills back.

Read through the knowledge port (never from the knowledge service's package): skills of
the request's hardware and the spec's op family, each an edge of this space
(``Transformation(name=<knob>, params={"group": ..., "value": ...})``, or a tuning edge
that changed one knob). A reader that
fails costs the weights, never the proposal.
"""

from __future__ import annotations

import logging

from kernelevolve.errors import KernelEvolveError
from kernelevolve.op_family import classify_op_family
from kernelevolve.ports.knowledge import KnowledgeReader

from .tune import TUNE

log = logging.getLogger(__name__)


def skill_gains(reader: KnowledgeReader, spec_source: str, hardware_kind: str,
                limit: int = 50) -> dict[tuple[str, str], float]:
    """(transformation name, value) -> best lower gain bound among active/demoted skills."""
    try:
        hints = reader.skills(hardware_kind=hardware_kind, op_family=classify_op_family(spec_source), limit=limit)
    except KernelEvolveError as exc:
        log.warning("skills unavailable; transformations unweighted", extra={"error": str(exc)})
        return {}
    out: dict[tuple[str, str], float] = {}
    for h in hints:
        name, value = _edge(h.transformation, h.params)
        if not name or value is None or h.gain_low <= 1.0:
            continue
        weight = h.gain_low if h.status == "active" else 1.0 + (h.gain_low - 1.0) / 2
        key = (name, value)
        out[key] = max(out.get(key, 0.0), weight)
    return out


def _edge(name: str, params: dict[str, str]) -> tuple[str, str | None]:
    """(knob name, value) of a skill's edge: a knob edge as it is, and a tuning edge that
    changed one knob (``tune``, ``set=g0.BLOCK_M=128``) as that knob's edge, so a launch
    configuration the tuning stage found good weighs the same knob and value later."""
    if name == TUNE:
        changes = [c for c in params.get("set", "").split(",") if c]
        if len(changes) != 1 or "=" not in changes[0]:
            return "", None
        key, _, value = changes[0].partition("=")
        return key.split(".", 1)[-1], value
    return name, params.get("value")
