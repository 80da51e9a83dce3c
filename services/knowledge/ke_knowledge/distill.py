"""Thin skill distillation: turn one improving search step into a reusable sentence.

Only a clear win is kept (at least ``MIN_GAIN`` over the parent): search noise of a few
percent must not become "knowledge" that later steers other sessions. Nor is any win
timed in Triton's CPU interpreter: those timings check correctness and say nothing about
a kernel's speed, so a CPU session records verdicts, never speed lessons.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

from ke_knowledge.domain import Skill

MIN_GAIN = 0.05


def _format_params(params: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in sorted(params))


def skill_id_for(session_id: str, candidate_id: str) -> str:
    """Stable id: distilling the same candidate twice replaces rather than duplicates."""
    digest = hashlib.sha256(f"{session_id}\x00{candidate_id}".encode()).hexdigest()[:16]
    return f"skill-{digest}"


def distill_skill(
    session_id: str,
    candidate_id: str,
    spec_name: str,
    transformation_name: str,
    params: Mapping[str, str],
    speedup: float,
    parent_speedup: float,
    hardware_kind: str,
    *,
    interpreted: bool,
    min_gain: float = MIN_GAIN,
) -> Skill | None:
    """A Skill when a correct child beats its correct parent by >= ``min_gain``, else None.

    Speedups are baseline/candidate time ratios and are 0 unless the kernel was correct,
    so a non-positive value on either side means there is no speed lesson to learn;
    ``interpreted`` timings (the CPU interpreter) never teach one.
    None is the ordinary "nothing worth remembering" answer, not an error.
    """
    if interpreted or not transformation_name:
        return None
    if not (math.isfinite(speedup) and math.isfinite(parent_speedup)):
        return None
    if speedup <= 0 or parent_speedup <= 0:
        return None
    if speedup < parent_speedup * (1.0 + min_gain):
        return None
    rendered = _format_params(params)
    hw = hardware_kind or "any hardware"
    gain = (speedup / parent_speedup - 1.0) * 100.0
    text = (
        f"On {hw}, for {spec_name}, {transformation_name}({rendered}) improved speedup "
        f"from {parent_speedup:.2f}x to {speedup:.2f}x (+{gain:.0f}%)."
    )
    return Skill(
        skill_id=skill_id_for(session_id, candidate_id),
        title=f"{transformation_name} for {spec_name} on {hw}",
        text=text,
        op_pattern=spec_name,
        hardware_kind=hardware_kind,
        source_session_id=session_id,
        source_candidate_id=candidate_id,
        transformation=transformation_name,
        params=dict(params),
        speedup=speedup,
        parent_speedup=parent_speedup,
    )
