"""Run generated cases: lower each spec with the offline synthesizer (its seed genome and,
optionally, a random genome from its space), check every candidate against its reference in
ONE child interpreter (``check.run_in_subprocess``), count how much was lowered, and write
failing cases out as regression specs.

    python -m tests.synthesizer.fuzz --start 0 --count 200 [--genomes] [--save]
"""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess

from .generator import FuzzCase, generate, validate

log = logging.getLogger(__name__)
REGRESSIONS_DIR = Path(__file__).resolve().parents[1] / "regressions"


@dataclass
class Failure:
    case: FuzzCase
    genome: dict[str, str]
    reason: str


@dataclass
class FuzzReport:
    """Per run: how many candidates were lowered fully (no library call), partly (Triton
    kernels plus library calls) or not at all (no Triton kernel), and what failed."""

    cases: int = 0
    invalid: int = 0  # the generated reference itself did not run (not a synthesizer case)
    candidates: int = 0
    full: int = 0
    partial: int = 0
    none: int = 0
    # raised a RuntimeError on an extra shape set after passing the example's: a launcher
    # refusing a run-time broadcast the captured shapes did not have (a size-1 dim that is
    # not 1 any more), which the synthesizer does by design rather than compute something else
    refused: list[Failure] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    fallbacks: dict[str, tuple[str, ...]] = field(default_factory=dict)  # candidate id -> library calls

    def summary(self) -> str:
        return (f"{self.cases} cases ({self.invalid} invalid references), {self.candidates} candidates: "
                f"{self.full} lowered fully, {self.partial} partly, {self.none} not at all; "
                f"{len(self.refused)} refused an extra shape set; {len(self.failures)} failed")


def random_genome(synth: OfflineSynthesizer, case: FuzzCase, rng: random.Random) -> dict[str, str]:
    """About half the knobs of the seed's space set to a random choice."""
    return {key: rng.choice(choices) for key, choices in synth.space(case.source, case.name)
            if len(choices) > 1 and rng.random() < 0.5}


def _count(report: FuzzReport, source: str, fallbacks: tuple[str, ...]) -> None:
    report.candidates += 1
    if "@triton.jit" not in source:
        report.none += 1
    elif fallbacks:
        report.partial += 1
    else:
        report.full += 1


def run_cases(synth: OfflineSynthesizer, seeds: range | list[int], genomes: bool = False) -> FuzzReport:
    """Generate, lower and check the cases ``seeds``; with ``genomes`` each case is also
    lowered at one random genome of its space."""
    report = FuzzReport()
    jobs: list[dict[str, Any]] = []
    pending: dict[str, tuple[FuzzCase, dict[str, str]]] = {}
    for seed in seeds:
        case = generate(seed)
        report.cases += 1
        why = validate(case)
        if why:
            report.invalid += 1
            log.info("case %s: reference does not run (%s)", case.name, why)
            continue
        variants: list[dict[str, str]] = [{}]
        if genomes:
            try:
                variants.append(random_genome(synth, case, random.Random(seed)))
            except Exception as exc:  # noqa: BLE001 - a synthesizer failure is a finding
                report.failures.append(Failure(case, {}, f"space raised {type(exc).__name__}: {exc}"))
        for k, genome in enumerate(variants):
            try:
                spec = synth._capture(case.source, case.name)
                source, _full, fallbacks = synth.lower(spec, genome)
            except Exception as exc:  # noqa: BLE001 - a synthesizer failure is a finding
                report.failures.append(Failure(case, genome, f"lowering raised {type(exc).__name__}: {exc}"))
                continue
            _count(report, source, fallbacks)
            atol, rtol = case.tolerance
            jid = f"{case.name}#{k}"
            if fallbacks:
                report.fallbacks[jid] = fallbacks
            pending[jid] = (case, genome)
            # a graph specialised to the example shapes is not expected to run on others
            jobs.append({"id": jid, "spec_source": case.source, "candidate_source": source, "seeds": [1, 2],
                         "atol": atol, "rtol": rtol, "extra": spec.tracer == "symbolic"})
    for result in run_in_subprocess(jobs) if jobs else []:
        if result["ok"]:
            continue
        case, genome = pending[result["id"]]
        bad = [t for t in result["trials"] if not t["ok"]]
        reason = result["error"].strip().splitlines()[-1] if result["error"] else f"mismatch: {bad}"
        seeds_ok = [t["kind"] for t in result["trials"]] == ["seed", "seed"] and not bad
        refused = seeds_ok and reason.startswith("RuntimeError:")
        (report.refused if refused else report.failures).append(Failure(case, genome, reason))
    return report


def save_regression(failure: Failure, folder: Path = REGRESSIONS_DIR) -> Path:
    """Write the failing case's spec source as ``<folder>/fuzz_<seed>.py`` (a regression spec
    the default suite checks); the genome, if not the seed's, is recorded in its docstring."""
    case = failure.case
    genome = f" at genome {failure.genome}" if failure.genome else ""
    note = f'"""Fuzz case {case.seed}{genome} failed: {failure.reason[:300]}\n\n'
    body = case.source.split('"""', 2)
    path = folder / f"{case.name}.py"
    path.write_text(note + body[1].strip() + '\n"""' + body[2])
    return path
