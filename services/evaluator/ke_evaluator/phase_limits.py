"""Phase limits of one job: the fixed compile/run limits, extended by the spec's measured
reference cost. Stdlib only (the parent and the worker both compute them).

Why: at real sizes the protocol itself outlasts a fixed limit. On an H100, correct seeds of
operators with 4-12 GB inputs (a bidirectional multi-layer LSTM, a transposed convolution
with a 2^31-element output) ended ``timeout: run phase exceeded 120 s``: the float64
reference and five input sets take longer than that for the reference alone, and a 4 GiB
GEMM spent 57 s in correctness and 25 s in the arithmetic audit. A fixed limit blamed the
candidate for the spec's size.

A phase's limit is its fixed limit plus ``factor`` times the reference work the protocol
does in it, capped::

    run     = min(cap, run_timeout_s     + factor * (calls * eager_s + float64_runs * float64_s
                                                      + checks * check_s + sets_made * inputs_s))
    compile = min(cap, compile_timeout_s + factor * (2 * build_s + inputs_s + eager_s))

The fixed part keeps its meaning (the Triton JIT, the profiler's and the checks' own
overheads: costs that do not grow with the operator, and the timing budget), so a small
spec's limits do not move. ``calls`` counts the reference's calls and the candidate's (each allowed ``factor``
times the reference's seconds) from the options and the spec's number of extra sets alone:
nothing the candidate controls (its kernel count, its speed) enters a limit.

Only the reference's own seconds enter: measured in the worker in a ``measure`` phase
before the job imports the candidate (one call on an input set no trial uses, one
comparison of its output, its float64 run), or stored by the Judge from an earlier job of
the spec (``Judge.reference_cost``).
The parent (``JobLimits``) lets phases move forward only (measure -> compile -> run) and
takes a cost only where the measure phase ends, so nothing written to the pipe once the
candidate is loaded can lengthen a limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# "import": a spec validation's import of the spec (its module-level code) alone, under
# ``spec_import_timeout_s``; only a validation has it (LimitPolicy, JobLimits(importing=True)).
PHASES = ("import", "measure", "compile", "run")

# What each phase's limit covers, for a timeout's reason.
_WHAT = {"import": "importing the spec (its module-level code; a normal spec imports in milliseconds)",
         "measure": "measuring the reference's cost (one reference call, one comparison and its float64 run, "
                    "before any candidate code ran)",
         "compile": "compile phase (import + construct + first call)",
         "run": "run phase (correctness + timing)"}


def _seconds(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) and x >= 0 else None


@dataclass(frozen=True)
class ReferenceCost:
    """What the spec's reference costs on this evaluator's device, measured in a worker
    before any candidate code of that job ran."""

    # one reference call on a main input set as the protocol makes it: its inputs cloned,
    # the call, a large output moved to the host
    eager_s: float
    float64_s: float  # the float64 reference on that set (on the device when it fits, else the host)
    inputs_s: float  # making one main input set (get_inputs)
    build_s: float  # building the reference model (get_init_inputs + construct + weights)
    # one value comparison of an output on the device with the reference's (on the host when
    # large): at real sizes of memory-bound operators this, not the call, is what costs
    check_s: float
    extra_sets: int  # the spec's extra shape sets (each counted as a main set: an upper bound)
    float64_on: str = ""  # "device" | "host": where the float64 run was measured

    def to_dict(self) -> dict[str, Any]:
        return {"eager_s": round(self.eager_s, 6), "float64_s": round(self.float64_s, 6),
                "inputs_s": round(self.inputs_s, 6), "build_s": round(self.build_s, 6),
                "check_s": round(self.check_s, 6), "extra_sets": self.extra_sets, "float64_on": self.float64_on}

    @classmethod
    def from_dict(cls, d: Any) -> ReferenceCost | None:
        """The cost in ``d``, or None when it is missing or not a plausible measurement."""
        if not isinstance(d, dict):
            return None
        secs = [_seconds(d.get(k)) for k in ("eager_s", "float64_s", "inputs_s", "build_s", "check_s")]
        extra = d.get("extra_sets")
        if any(s is None for s in secs) or not isinstance(extra, int) or isinstance(extra, bool) or extra < 0:
            return None
        eager, f64, inputs, build, check = (float(s or 0.0) for s in secs)
        return cls(eager, f64, inputs, build, check, extra, str(d.get("float64_on", ""))[:16])

    def merged(self, other: ReferenceCost) -> ReferenceCost:
        """The smaller of two measurements, per part: a later measurement can only tighten a
        limit, so one inflated by a loaded machine (or by anything else in its worker)
        does not stick."""
        return ReferenceCost(min(self.eager_s, other.eager_s), min(self.float64_s, other.float64_s),
                             min(self.inputs_s, other.inputs_s), min(self.build_s, other.build_s),
                             min(self.check_s, other.check_s), max(self.extra_sets, other.extra_sets),
                             self.float64_on if self.float64_s <= other.float64_s else other.float64_on)


@dataclass(frozen=True)
class PhaseLimits:
    """Seconds per phase of one job and how they were derived (a verdict's evidence)."""

    compile_s: float
    run_s: float
    measure_s: float
    evidence: dict[str, Any] = field(default_factory=dict)
    import_s: float = 60.0

    def seconds(self, phase: str) -> float:
        return {"import": self.import_s, "measure": self.measure_s, "compile": self.compile_s}.get(phase, self.run_s)

    def explain(self, phase: str) -> str:
        """``<phase> exceeded N s (<why N>)`` for a timeout's reason."""
        ev = self.evidence
        limit = self.seconds(phase)
        if phase == "import":
            why = "evaluator.spec_import_timeout_s; the spec's import never returned"
        elif phase == "measure":
            why = "evaluator.run_timeout_max_s; the spec's reference is too slow for this evaluator"
        elif ev.get("basis") != "reference cost":
            why = f"fixed limit; {ev.get('basis', '')}"
        else:
            fixed = ev["fixed"][f"{phase}_s"]
            work = ev[f"{phase}_work_s"]
            why = (f"{fixed:g} s fixed + {ev['factor']:g} x {work:.3g} s of the reference's measured protocol work"
                   + (f", capped at {ev['cap_s']:g} s" if phase in ev.get("capped", []) else ""))
        return f"{_WHAT.get(phase, phase)} exceeded {limit:.4g} s ({why})"


@dataclass(frozen=True)
class LimitPolicy:
    """The options the limits depend on (a job's flat options: ``Judge._job_options``)."""

    compile_timeout_s: float = 120.0
    run_timeout_s: float = 120.0
    run_timeout_max_s: float = 1800.0
    factor: float = 4.0  # 0: fixed limits, nothing measured
    correctness_trials: int = 5
    time_candidates: bool = True
    min_timing_trials: int = 3
    timing_input_sets: int = 3
    compile_baseline: bool = False
    # A spec's import in a validation (``JobLimits(importing=True)``). Spec imports measured
    # here (2 shared cores, torch already imported in the worker): median 0.7 ms, at most
    # 13 ms over the 137 examples; ``import transformers``, the heaviest import a spec
    # plausibly makes, 2.3 s. 60 s leaves a cold disk 25x that, and ends a hanging import
    # well inside the 240 s a session start waits for validation (gateway.validate_timeout_s).
    spec_import_timeout_s: float = 60.0

    @classmethod
    def from_job_options(cls, d: dict[str, Any]) -> LimitPolicy:
        base = cls()

        def num(key: str, default: float) -> float:
            v = _seconds(d.get(key, default))
            return default if v is None else v

        return cls(
            compile_timeout_s=num("compile_timeout_s", base.compile_timeout_s),
            run_timeout_s=num("run_timeout_s", base.run_timeout_s),
            run_timeout_max_s=num("run_timeout_max_s", base.run_timeout_max_s),
            factor=num("reference_cost_factor", base.factor),
            correctness_trials=int(num("correctness_trials", base.correctness_trials)),
            time_candidates=bool(d.get("time_candidates", base.time_candidates)),
            min_timing_trials=int(num("min_timing_trials", base.min_timing_trials)),
            timing_input_sets=int(num("timing_input_sets", base.timing_input_sets)),
            compile_baseline=bool(d.get("compile_baseline", base.compile_baseline)),
            spec_import_timeout_s=num("spec_import_timeout_s", base.spec_import_timeout_s),
        )

    @property
    def scaling(self) -> bool:
        return self.factor > 0

    def protocol(self, extra_sets: int) -> dict[str, int]:
        """Calls of the run phase that scale with the operator (``worker/evaluation.py``):
        per correctness set a reference call, a candidate call, a float64 run (at most:
        it runs where the tolerance policy needs it), two comparisons (eager, float64) and
        the set itself; the repeat after the reference, the kernel-dependency probe, the
        arithmetic audit's two calls and the library profile (candidate), three of them
        compared; the FLOP count (reference); the timing's warm-up (one round per set) and
        its rounds up to the minimum plus the one that crosses the budget, each contestant
        once per round."""
        sets = max(1, self.correctness_trials) + extra_sets
        contestants = 2 + (1 if self.compile_baseline else 0)
        timing_sets = max(1, self.timing_input_sets) if self.time_candidates else 0
        rounds = timing_sets + max(1, self.min_timing_trials) + 1 if self.time_candidates else 0
        return {"sets": sets, "reference_calls": sets + 1, "candidate_calls": sets + 4,
                "timing_calls": contestants * rounds, "float64_runs": sets, "checks": 2 * sets + 3,
                "input_sets_made": sets - 1 + timing_sets}

    def upper_bounds(self) -> tuple[float, float]:
        """The longest compile and run limits any job can get (the lock-wait default)."""
        if not self.scaling:
            return self.compile_timeout_s, self.run_timeout_s
        return (max(self.compile_timeout_s, self.run_timeout_max_s), max(self.run_timeout_s, self.run_timeout_max_s))

    def limits(self, cost: ReferenceCost | None) -> PhaseLimits:
        fixed = {"compile_s": self.compile_timeout_s, "run_s": self.run_timeout_s}
        measure_s = max(self.run_timeout_s, self.run_timeout_max_s)
        if not self.scaling or cost is None:
            basis = ("scaling off (evaluator.reference_cost_factor = 0)" if not self.scaling
                     else "reference cost not measured yet")
            return PhaseLimits(self.compile_timeout_s, self.run_timeout_s, measure_s,
                               {"compile_s": self.compile_timeout_s, "run_s": self.run_timeout_s, "basis": basis,
                                "fixed": fixed}, import_s=self.spec_import_timeout_s)
        calls = self.protocol(cost.extra_sets)
        n_calls = calls["reference_calls"] + calls["candidate_calls"] + calls["timing_calls"]
        run_work = (n_calls * cost.eager_s + calls["float64_runs"] * cost.float64_s
                    + calls["checks"] * cost.check_s + calls["input_sets_made"] * cost.inputs_s)
        compile_work = 2 * cost.build_s + cost.inputs_s + cost.eager_s
        capped: list[str] = []

        def bounded(name: str, fixed_s: float, work: float) -> float:
            want, most = fixed_s + self.factor * work, max(fixed_s, self.run_timeout_max_s)
            if want > most:
                capped.append(name)
            return min(want, most)

        compile_s = bounded("compile", self.compile_timeout_s, compile_work)
        run_s = bounded("run", self.run_timeout_s, run_work)
        return PhaseLimits(compile_s, run_s, measure_s, import_s=self.spec_import_timeout_s, evidence={
            "compile_s": round(compile_s, 3), "run_s": round(run_s, 3), "basis": "reference cost",
            "fixed": fixed, "factor": self.factor, "cap_s": self.run_timeout_max_s,
            "reference_cost": cost.to_dict(), "protocol": calls,
            "compile_work_s": round(compile_work, 4), "run_work_s": round(run_work, 4), "capped": capped,
        })


class JobLimits:
    """The parent's view of one job's limits as its phases go by.

    Phases only move forward (measure -> compile -> run): a phase message that repeats or
    goes back is ignored, so it restarts no clock. A reference cost is taken only from the
    message that ends the measure phase, which the worker sends before it imports the
    candidate; a job that was not asked to measure has no measure phase at all.
    """

    def __init__(self, policy: LimitPolicy, cost: ReferenceCost | None = None, measure: bool = False,
                 cost_source: str = "", importing: bool = False) -> None:
        self.policy = policy
        # A validation: the spec's import is a phase of its own (the worker reports "compile"
        # once the spec imported), under the policy's spec_import_timeout_s.
        self.importing = importing
        self.measure = measure and policy.scaling and cost is None
        self.cost = cost
        self.cost_source = cost_source if cost is not None else ""
        self.measured: ReferenceCost | None = None  # what this job's measure phase reported
        self.phase = ""  # none reported yet
        self.limits = policy.limits(cost)

    @property
    def first_phase(self) -> str:
        return "import" if self.importing else "measure" if self.measure else "compile"

    def seconds(self, phase: str = "") -> float:
        return self.limits.seconds(phase or self.phase or self.first_phase)

    def enter(self, msg: dict[str, Any]) -> bool:
        """Handle a ``phase`` message: True when the job moved to a later phase (its clock
        restarts with ``seconds()``), False when the message was ignored."""
        new = msg.get("phase")
        if new not in PHASES or (new == "measure" and not self.measure) or (new == "import" and not self.importing):
            return False
        if self.phase and PHASES.index(new) <= PHASES.index(self.phase):
            return False
        if self.phase == "measure" and new == "compile":
            cost = ReferenceCost.from_dict(msg.get("reference_cost"))
            if cost is not None:
                self.measured = self.cost = cost
                self.cost_source = "measured by this job before its candidate was loaded"
                self.limits = self.policy.limits(cost)
        self.phase = new
        return True

    def explain(self) -> str:
        return self.limits.explain(self.phase or self.first_phase)

    def evidence(self) -> dict[str, Any]:
        ev = dict(self.limits.evidence)
        if self.cost_source:
            ev["reference_cost_source"] = self.cost_source
        return ev
