"""The options of one job as the worker reads them (flat: the Judge's ``job_options``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..phase_limits import ReferenceCost


class PhaseFn(Protocol):
    """Reports a phase to the parent; ``cost`` ends the measure phase (``process._Phases``)."""

    def __call__(self, name: str, cost: ReferenceCost | None = None) -> None: ...


@dataclass
class JobOptions:
    device: str = "cpu"
    correctness_trials: int = 5
    # None: a random base seed per job (recorded in the evidence). Freed memory of an
    # earlier job in the same worker then never holds the answer for this job's inputs.
    seed: int | None = None
    # True: ``seed`` was derived by the Judge from its secret salt and is shared by a few
    # jobs of the spec (reference cache). Not reported (``seed_id`` instead); trial 1 and
    # the timing sets then use a per-job secret seed.
    seed_shared: bool = False
    seed_id: str = ""
    # Reference cache cap: bytes; None = ``reference_cache_fraction`` of free device memory
    # (CUDA) or reference_cache.CPU_DEFAULT_BYTES; 0 = off.
    reference_cache_bytes: int | None = None
    reference_cache_fraction: float = 0.25
    time_candidates: bool = True
    min_timing_trials: int = 3
    max_timing_trials: int = 10
    timing_ci_target: float = 0.02
    timing_budget_s: float = 30.0
    timing_input_sets: int = 3
    error_budget_factor: float = 10.0
    check_kernel_dependency: bool = True
    # The arithmetic audit stops analysing once it has its evidence (arithmetic_audit.Economy);
    # False: every launch is analysed, as the fallback does.
    audit_economy: bool = True
    profile_library_time: bool = True
    compile_baseline: bool = False
    strict_strides: bool = True
    # The Judge has no reference cost for the spec yet: measure it first (phase "measure").
    measure_reference_cost: bool = False
    # A dry run that compiles the candidate's kernels side by side before its first call
    # (precompile.py): auto = on GPU only (the interpreter compiles nothing), on, off;
    # the Judge always sends its option (default off: judge/options.py says why)
    precompile: str = "off"
    # The precision contract (kernelevolve.precision): default | strict | tf32.
    precision: str = "default"
    # "full": the whole protocol; "screen": the stages of the screen tier only (stages.PIPELINE)
    tier: str = "full"
    # The screen's short timing: at most this many trials and seconds (the candidate alone,
    # against the baseline timed once per spec and input shapes in this worker).
    screen_max_timing_trials: int = 10
    screen_timing_budget_s: float = 2.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobOptions:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)
