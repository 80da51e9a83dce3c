"""The evaluation protocol as a pipeline of named stages (``evaluation.Evaluator`` runs it).

Each stage is a module with ``NAME`` and ``run(ctx) -> evidence``; ``PIPELINE`` lists them
in order with the tiers that run them, the phase limit they run under (``process._Phases``:
``measure`` and ``compile`` before the candidate's first call returns, ``run`` after) and
whether the driver closes a lap for them (``v.evidence["stage_s"]`` and the memory peak per
stage). A stage raises ``defenses.Outcome`` to end the job with a verdict; later stages do
not run. The job's tier (``JobOptions.tier``) picks the stages:

    full:   load -> compile -> correctness -> integrity -> flops -> library_profile -> timing -> diagnosis
    screen: load -> compile -> screen -> flops -> timing (short) -> diagnosis
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kernelevolve.ports.verdict import TIERS

from . import compile as compile_stage
from . import correctness, diagnosis, flops, integrity, library_profile, load, screen, timing
from .context import Evidence, Harness, JobContext, StageFn, clock


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFn
    # The phase limit it runs under. ``load`` opens ``measure`` or ``compile`` itself.
    phase: str
    # The tiers whose jobs run it.
    tiers: frozenset[str] = frozenset(TIERS)
    # False: its wall time counts toward the next lap (``load``: toward ``measure`` or
    # ``compile``, as it always did), so ``stage_s`` keys stay the ones the bench reads.
    lap: bool = True


_SCREEN, _FULL = frozenset({"screen"}), frozenset({"full"})
PIPELINE: tuple[Stage, ...] = (
    Stage(load.NAME, load.run, "measure", lap=False),
    Stage(compile_stage.NAME, compile_stage.run, "compile"),
    Stage(screen.NAME, screen.run, "run", tiers=_SCREEN),
    Stage(correctness.NAME, correctness.run, "run", tiers=_FULL),
    Stage(integrity.NAME, integrity.run, "run", tiers=_FULL),
    Stage(flops.NAME, flops.run, "run"),
    Stage(library_profile.NAME, library_profile.run, "run", tiers=_FULL),
    Stage(timing.NAME, timing.run, "run"),
    Stage(diagnosis.NAME, diagnosis.run, "run", lap=False),
)


def for_tier(tier: str, stages: Sequence[Stage] = PIPELINE) -> list[Stage]:
    """The stages a job of ``tier`` runs, in order."""
    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r}: one of {', '.join(TIERS)}")
    return [s for s in stages if tier in s.tiers]


def run_pipeline(ctx: JobContext, stages: Sequence[Stage] = PIPELINE) -> None:
    """Run the stages of the job's tier in order; each stage's evidence is merged into the
    verdict's, and the verdict names its tier and the stages that judged it."""
    chosen = for_tier(ctx.opts.tier, stages)
    ctx.v.tier = ctx.opts.tier  # type: ignore[assignment]
    ran: list[str] = []
    ctx.v.evidence["stages"] = {"tier": ctx.opts.tier, "ran": ran,
                                "skipped": [s.name for s in stages if s not in chosen]}
    for stage in chosen:
        ran.append(stage.name)
        evidence = stage.run(ctx)
        if evidence:
            ctx.v.evidence.update(evidence)
        if stage.lap:
            ctx.lap(stage.name)


__all__ = ["PIPELINE", "TIERS", "for_tier", "Evidence", "Harness", "JobContext", "Stage", "clock", "run_pipeline"]
