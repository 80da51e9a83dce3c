"""The judge port: what the evaluator service (and any synchronous driver) asks of a
candidate judge. ``ke_evaluator.Judge`` implements it with sandboxed workers; tests use
a double; both pass ``tests/contracts/test_judge_port.py``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from kernelevolve.ports.verdict import SpecCheck, Verdict

# One job of ``evaluate_many``: (spec_source, candidate_source[, candidate_id[, fresh_worker[, tier]]]).
EvalJobTuple = Sequence[Any]


class JudgePort(Protocol):
    def validate_spec(self, spec_source: str, spec_name: str) -> SpecCheck:
        """Whether the spec loads, builds and runs as a reference; never raises for a bad spec."""
        ...

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, compile_baseline: bool = False, tier: str | None = None) -> Verdict:
        """The verdict on one candidate; a broken candidate is a verdict, never an exception.
        ``compile_baseline``: also time torch.compile of the reference (``speedup_vs_compile``);
        callers pass it only when asked for, so a judge without it still serves the rest.
        A judge may also take ``precision`` (the contract, ``kernelevolve.precision``; the
        evaluator service passes it for a session that names one): ``ke_evaluator.Judge`` does.
        ``tier``: "screen" (provisional) or "full" (None: the judge's default); the verdict
        says which (``Verdict.tier``). Callers pass it only when they want a tier."""
        ...

    def evaluate_many(self, jobs: Iterable[EvalJobTuple]) -> list[Verdict]:
        """Verdicts in the order of ``jobs``, judged as in parallel as the judge allows."""
        ...
