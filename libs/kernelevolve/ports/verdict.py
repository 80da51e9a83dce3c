"""Result types of one evaluation. Plain dataclasses: no protobuf, no third-party deps.

``Verdict.to_dict()`` is the JSON report written to the object store;
the service layer translates a Verdict into ``kernelevolve.v1.EvaluationResult``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kernelevolve.errors import InvalidSpecError, NothingToComputeError, ResourceLimitError
from kernelevolve.precision import Precision

Status = Literal["correct", "incorrect", "rejected", "compile_error", "runtime_error", "timeout", "crashed"]
STATUSES: tuple[Status, ...] = (
    "correct",
    "incorrect",
    "rejected",
    "compile_error",
    "runtime_error",
    "timeout",
    "crashed",
)


@dataclass
class Timing:
    median_ms: float
    iqr_ms: float = 0.0
    ci_low_ms: float = 0.0
    ci_high_ms: float = 0.0
    trials: int = 0
    min_ms: float = 0.0
    samples_ms: list[float] = field(default_factory=list)
    # CUDA: median_ms is the kernels' device time (see timing.py); beside it the host's
    # enqueue time and the per-call time max(device, host) of back-to-back calls.
    device_median_ms: float = 0.0
    host_median_ms: float = 0.0
    per_call_median_ms: float = 0.0


@dataclass
class Correctness:
    """Correctness figures; the policy that produces them is documented in the evaluator's
    ``worker/tolerance.py``. ``details``: one record per input set judged (its own figures)."""

    trials: int = 0
    max_abs_error: float = 0.0  # max |candidate - eager reference|
    max_rel_error: float = 0.0
    atol: float = 0.0
    rtol: float = 0.0
    details: list[dict[str, Any]] = field(default_factory=list)
    # The bound that decided (of the failing set, else of the set with the largest error
    # ratio), in words, e.g. "|c - r| <= 0.0001 + 0.0001*|r| (relative at |ref| ~ 1e+19)".
    bound: str = ""
    # Against the float64 reference where it was computed (None: on no set):
    # max |candidate - float64|, max |eager - float64|, and their ratio.
    candidate_error: float | None = None
    reference_error: float | None = None
    error_ratio: float | None = None
    # Elements outside the eager tolerance accepted because eager's own error is
    # comparable there (near ties, cancellation).
    outliers: int = 0


@dataclass
class KernelInfo:
    name: str
    launches: int = 0
    time_ms: float = 0.0
    registers: int = 0
    shared_bytes: int = 0
    spills: int = 0


@dataclass
class Diagnosis:
    bound: Literal["memory", "compute", "latency", "unknown"] = "unknown"
    bytes_moved: float = 0.0
    flops: float = 0.0
    achieved_gbps: float = 0.0
    achieved_gflops: float = 0.0
    roofline_fraction: float = 0.0
    library_time_fraction: float = 0.0
    kernels: list[KernelInfo] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class SpecCheck:
    """Outcome of validating an operator spec before any candidate is judged."""

    ok: bool
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    # e.g. output shapes/dtypes, parameter count: informational.
    info: dict[str, Any] = field(default_factory=dict)
    # Not ok because the reference ran out of memory inside the evaluator's own limits:
    # the spec is valid, the evaluator too small (ResourceLimitError, not InvalidSpecError).
    resource_limited: bool = False
    # Not ok because the reference only views its inputs (reshape, permute, split): valid,
    # but there is nothing to compute (NothingToComputeError, not InvalidSpecError).
    nothing_to_compute: bool = False

    def raise_if_failed(self, name: str) -> None:
        """The error a caller raises for a failed check: ``ResourceLimitError`` when our
        limits stopped the reference, ``NothingToComputeError`` for a reference that only
        views its inputs, else ``InvalidSpecError``."""
        if self.ok:
            return
        reason = f"{name}: {self.reason}" if name else self.reason
        if self.resource_limited:
            raise ResourceLimitError(reason)
        if self.nothing_to_compute:
            raise NothingToComputeError(reason)
        raise InvalidSpecError(reason or "the reference could not be run")


Tier = Literal["screen", "full"]
TIERS: tuple[Tier, ...] = ("screen", "full")


@dataclass
class Verdict:
    status: Status
    reason: str
    candidate_id: str = ""
    correctness: Correctness | None = None
    candidate_timing: Timing | None = None
    baseline_timing: Timing | None = None
    speedup: float = 0.0
    diagnosis: Diagnosis | None = None
    device: str = "cpu"
    interpreted: bool = False
    fingerprint: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # Free-form evidence (static-check findings, launch counts, sandbox notes).
    evidence: dict[str, Any] = field(default_factory=dict)
    # Optional torch.compile baseline (GPU only, EvalOptions.compile_baseline).
    compile_baseline_timing: Timing | None = None
    speedup_vs_compile: float = 0.0
    # The precision contract the reference, the baselines and the candidate ran under
    # (kernelevolve.precision): its name, its flags and what the spec set at import. A
    # verdict that never reached a worker names the contract asked for, with no flags.
    precision: Precision | None = None
    # Which protocol judged it: "full" (every input set, the float64 budget, the integrity
    # probes, strict timing) or "screen" (one input set against the cached eager output,
    # launch accounting, a short timing against the cached baseline). A screened verdict is
    # provisional: nothing is called best, distilled, exported or reported on it alone.
    tier: Tier = "full"

    @property
    def is_correct(self) -> bool:
        return self.status == "correct"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.precision is not None:  # with its one-line description, for reports
            d["precision"] = self.precision.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Verdict:
        d = dict(data)
        if d.get("correctness") is not None:
            d["correctness"] = Correctness(**d["correctness"])
        for key in ("candidate_timing", "baseline_timing", "compile_baseline_timing"):
            if d.get(key) is not None:
                d[key] = Timing(**d[key])
        if d.get("precision") is not None:
            d["precision"] = Precision.from_dict(d["precision"])
        if d.get("diagnosis") is not None:
            diag = dict(d["diagnosis"])
            diag["kernels"] = [KernelInfo(**k) for k in diag.get("kernels", [])]
            d["diagnosis"] = Diagnosis(**diag)
        return cls(**d)
