"""Skills as transformation weights: which (knob, value) edges distilled skills back.

Read through the knowledge port (never from the knowledge service's package): skills of
the request's hardware and the spec's op family, each an edge of this space
(``Transformation(name=<knob>, params={"group": ..., "value": ...})``). A reader that
fails costs the weights, never the proposal.
"""

from __future__ import annotations

import logging

from kernelevolve.errors import KernelEvolveError
from kernelevolve.op_family import classify_op_family
from kernelevolve.ports.knowledge import KnowledgeReader

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
        value = h.params.get("value")
        if not h.transformation or value is None or h.gain_low <= 1.0:
            continue
        weight = h.gain_low if h.status == "active" else 1.0 + (h.gain_low - 1.0) / 2
        key = (h.transformation, value)
        out[key] = max(out.get(key, 0.0), weight)
    return out
