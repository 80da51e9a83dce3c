"""The evaluation protocol as a pipeline of named stages (``evaluation.Evaluator`` runs it).

Each stage is a module with ``NAME`` and ``run(ctx) -> evidence``; ``PIPELINE`` lists them
in order with the phase limit they run under (``process._Phases``: ``measure`` and
``compile`` before the candidate's first call returns, ``run`` after) and whether the
driver closes a lap for them (``v.evidence["stage_s"]`` and the memory peak per stage).
A stage raises ``defenses.Outcome`` to end the job with a verdict; later stages do not run.

    load -> compile -> correctness -> integrity -> flops -> library_profile -> timing -> diagnosis
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from . import compile as compile_stage
from . import correctness, diagnosis, flops, integrity, library_profile, load, timing
from .context import Evidence, Harness, JobContext, StageFn, clock


@dataclass(frozen=True)
class Stage:
    name: str
    run: StageFn
    # The phase limit it runs under. ``load`` opens ``measure`` or ``compile`` itself.
    phase: str
    # False: its wall time counts toward the next lap (``load``: toward ``measure`` or
    # ``compile``, as it always did), so ``stage_s`` keys stay the ones the bench reads.
    lap: bool = True


PIPELINE: tuple[Stage, ...] = (
    Stage(load.NAME, load.run, "measure", lap=False),
    Stage(compile_stage.NAME, compile_stage.run, "compile"),
    Stage(correctness.NAME, correctness.run, "run"),
    Stage(integrity.NAME, integrity.run, "run"),
    Stage(flops.NAME, flops.run, "run"),
    Stage(library_profile.NAME, library_profile.run, "run"),
    Stage(timing.NAME, timing.run, "run"),
    Stage(diagnosis.NAME, diagnosis.run, "run", lap=False),
)


def run_pipeline(ctx: JobContext, stages: Sequence[Stage] = PIPELINE) -> None:
    """Run ``stages`` in order on one job; each stage's evidence is merged into the verdict's."""
    for stage in stages:
        evidence = stage.run(ctx)
        if evidence:
            ctx.v.evidence.update(evidence)
        if stage.lap:
            ctx.lap(stage.name)


__all__ = ["PIPELINE", "Evidence", "Harness", "JobContext", "Stage", "clock", "run_pipeline"]
