"""How a skill's standing changes as later sessions measure it again.

A skill is a claim that one transformation pays in one context. Each later
measurement of the same transformation in the same context either confirms it
(CI-separated better again) or not; each environment change (another device, another
torch or triton major.minor) makes the claim stale. One strike demotes a skill (still
offered, weakly), a second retires it; a confirmation restores a demoted skill. The
reason of the last change is kept on the skill.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from ke_knowledge.distill import Gain
from ke_knowledge.domain import Skill


def major_minor(version: str) -> str:
    """"2.5.1+cu124" -> "2.5"; an unparseable version is compared whole."""
    parts = version.split("+")[0].split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else version


def provenance_mismatch(skill: Skill, fingerprint: Mapping[str, str]) -> str:
    """Why ``fingerprint`` (an environment measuring now) no longer matches the skill's
    provenance, or "" when it does. Keys missing on either side are not compared."""
    prov = skill.provenance
    device_then, device_now = prov.get("device_name", ""), fingerprint.get("device_name", "")
    if device_then and device_now and device_then != device_now:
        return f"device changed: measured on {device_then}, now {device_now}"
    for lib in ("torch", "triton"):
        then, now = prov.get(lib, ""), fingerprint.get(lib, "")
        if then and now and major_minor(then) != major_minor(now):
            return f"{lib} changed: measured with {then}, now {now}"
    return ""


def _strike(skill: Skill, reason: str) -> Skill:
    if skill.status == "retired":
        return skill
    status = "demoted" if skill.status == "active" else "retired"
    return replace(skill, status=status, status_reason=reason, failures=skill.failures + 1)


def review_measurement(skill: Skill, gain: Gain, where: str) -> Skill:
    """The skill after the same transformation was measured again in the same context."""
    if skill.status == "retired":
        return skill
    if gain.separated:
        return replace(skill, status="active", status_reason=f"confirmed by {where}" if skill.status != "active"
                       else skill.status_reason, confirmations=skill.confirmations + 1)
    return _strike(skill, f"gain not reproduced by {where}: {gain.value:.2f}x "
                          f"(interval {gain.low:.2f}-{gain.high:.2f}x)")


def review_environment(skill: Skill, fingerprint: Mapping[str, str], session_id: str) -> Skill:
    """The skill after an evaluation of ``session_id`` in an environment of its hardware
    kind was seen. One strike per session: every evaluation of a session sees the same
    environment, and one session alone must not retire a skill."""
    mismatch = provenance_mismatch(skill, fingerprint)
    if not mismatch or skill.status == "retired":
        return skill
    reason = f"{mismatch} (session {session_id})"
    if skill.status_reason == reason:
        return skill
    return _strike(skill, reason)


def retire(skill: Skill, reason: str) -> Skill:
    return replace(skill, status="retired", status_reason=reason or "retired by hand")
