"""Skill distillation: turn one improving search step, measured on real hardware, into a skill.

A skill is kept only when the child's timing is better than its parent's beyond doubt:
the two timings' confidence intervals must not overlap (``gain_low`` > 1), and the gain
must reach ``MIN_GAIN`` so that a real but negligible win does not steer later sessions.
Nor is any win timed in Triton's CPU interpreter a lesson: those timings check
correctness and say nothing about a kernel's speed, so a CPU session records verdicts,
never skills.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ke_knowledge.domain import Skill

MIN_GAIN = 0.05

# Fingerprint keys that say where a timing was taken; a skill carries them as provenance.
PROVENANCE_KEYS: tuple[str, ...] = ("device_name", "torch", "triton", "driver", "cuda")


@dataclass(frozen=True)
class Measurement:
    """One correct evaluation's timing of a candidate (milliseconds) and where it ran."""

    candidate_id: str
    median_ms: float
    ci_low_ms: float
    ci_high_ms: float
    interpreted: bool
    hardware_kind: str = ""
    fingerprint: Mapping[str, str] = field(default_factory=dict)

    def usable(self) -> bool:
        values = (self.median_ms, self.ci_low_ms, self.ci_high_ms)
        return (not self.interpreted and all(math.isfinite(v) and v > 0 for v in values)
                and self.ci_low_ms <= self.median_ms <= self.ci_high_ms)


@dataclass(frozen=True)
class SkillContext:
    """Where a transformation was applied: the same context is where it is expected to pay."""

    spec_name: str
    op_family: str = ""
    shape_class: str = ""
    dtype: str = ""
    hardware_kind: str = ""
    # The session's precision contract: a lesson holds under the contract it was timed in.
    precision: str = "default"


@dataclass(frozen=True)
class Gain:
    """Candidate-time ratio parent/child, with the interval its two CIs allow."""

    value: float
    low: float
    high: float

    @property
    def separated(self) -> bool:
        """True when even the least favourable ends of the two intervals show a win."""
        return self.low > 1.0


def measure_gain(parent: Measurement, child: Measurement) -> Gain | None:
    """None when either timing cannot teach anything (interpreted, missing or not finite)."""
    if not (parent.usable() and child.usable()):
        return None
    return Gain(parent.median_ms / child.median_ms, parent.ci_low_ms / child.ci_high_ms,
                parent.ci_high_ms / child.ci_low_ms)


def provenance_of(fingerprint: Mapping[str, str], session_id: str, candidate_id: str) -> dict[str, str]:
    out = {k: str(fingerprint[k]) for k in PROVENANCE_KEYS if fingerprint.get(k)}
    out.update(session=session_id, candidate=candidate_id)
    return out


def _format_params(params: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={params[k]}" for k in sorted(params))


def skill_id_for(context: SkillContext, transformation: str, params: Mapping[str, str]) -> str:
    """Stable per (context, transformation): learning the same lesson again confirms the
    stored skill instead of adding a twin of it."""
    parts = [context.hardware_kind, context.op_family, context.shape_class, context.dtype,
             context.spec_name, transformation, _format_params(params)]
    if context.precision != "strict":  # strict: the ids of skills learned before contracts existed
        parts.append(f"precision={context.precision}")
    key = "\x00".join(parts)
    return f"skill-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def distill_skill(
    session_id: str,
    candidate_id: str,
    context: SkillContext,
    transformation_name: str,
    params: Mapping[str, str],
    parent: Measurement,
    child: Measurement,
    *,
    min_gain: float = MIN_GAIN,
    before: str = "",
    after: str = "",
) -> Skill | None:
    """A Skill when the child is CI-separated faster than its parent by >= ``min_gain``.

    Both must have run on the same device (a comparison across devices measures the
    devices). None is the ordinary "nothing worth remembering" answer, not an error.
    """
    if not transformation_name:
        return None
    gain = measure_gain(parent, child)
    if gain is None or not gain.separated or gain.value < 1.0 + min_gain:
        return None
    if parent.fingerprint.get("device_name", "") != child.fingerprint.get("device_name", ""):
        return None
    rendered = _format_params(params)
    hw = context.hardware_kind or "any hardware"
    device = child.fingerprint.get("device_name", "") or hw
    text = (
        f"On {device} ({hw}), for {context.op_family or 'an'} operator {context.spec_name}"
        f"{f' ({context.shape_class})' if context.shape_class else ''}, {transformation_name}({rendered}) "
        f"cut the kernel time from {parent.median_ms:.4g} ms to {child.median_ms:.4g} ms: "
        f"gain {gain.value:.2f}x (interval {gain.low:.2f}-{gain.high:.2f}x), "
        f"precision contract {context.precision}."
    )
    return Skill(
        skill_id=skill_id_for(context, transformation_name, params),
        title=f"{transformation_name} for {context.op_family or context.spec_name} on {hw}",
        text=text,
        op_pattern=context.spec_name,
        hardware_kind=context.hardware_kind,
        source_session_id=session_id,
        source_candidate_id=candidate_id,
        transformation=transformation_name,
        params=dict(params),
        op_family=context.op_family,
        shape_class=context.shape_class,
        dtype=context.dtype,
        gain=gain.value,
        gain_low=gain.low,
        gain_high=gain.high,
        before=before,
        after=after,
        provenance=provenance_of(child.fingerprint, session_id, candidate_id),
        precision=context.precision,
    )
