"""Options of a ``Judge``, the one place that builds them from settings, and the device.

``EvalOptions`` holds what one Judge needs: the checks it runs on every candidate at the top,
and four sections it shares with the typed settings (``kernelevolve.config``):
``timing``, ``cache`` (the workers' reference cache), ``sandbox`` and ``pool``. YAML and
``KE_EVALUATOR_<SECTION>_<FIELD>`` reach them through ``EvaluatorSettings``, and
``options_from_settings`` is the only translation from settings to options (the evaluator
service and the CLI both use it).

``auto`` is resolved here only: ``resolve_device`` for a Judge's device (a device backend's
name, ``ke_evaluator.backends``), ``resolve_hardware_kind`` for the kind of hardware a
service announces.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.config import (
    EvaluatorSettings,
    ReferenceCacheOptions,
    SandboxOptions,
    TimingOptions,
    WorkerPoolOptions,
)
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.verdict import TIERS
from kernelevolve.precision import CONTRACTS

from .. import backends
from .gpus import select_gpus, visible_gpus

__all__ = ["EvalOptions", "ReferenceCacheOptions", "SandboxOptions", "TimingOptions", "WorkerPoolOptions",
           "host_gpus", "options_from_settings", "resolve_device", "resolve_hardware_kind"]


@dataclass
class EvalOptions:
    # "auto" or a device backend: "cpu" | "cuda" | "rocm" | a registered one;
    # auto = cuda (rocm on torch's HIP build) if torch.cuda.is_available() else cpu
    device: str = "auto"
    correctness_trials: int = 5
    compile_timeout_s: float = 120.0  # import + construct + first call (Triton JIT compile)
    run_timeout_s: float = 120.0  # correctness + integrity checks + timing
    # Both limits grow with the spec's measured reference cost (``phase_limits``): by this
    # factor times the reference's seconds of protocol work, up to ``run_timeout_max_s``.
    # 0: fixed limits, nothing measured.
    run_timeout_max_s: float = 1800.0
    reference_cost_factor: float = 4.0
    # A spec validation's import of the spec (phase_limits.LimitPolicy.spec_import_timeout_s
    # says why 60 s): a spec whose import never returns fails validation then.
    spec_import_timeout_s: float = 60.0
    time_candidates: bool = True
    scratch_dir: str | os.PathLike[str] | None = None  # root of worker scratch dirs; a temp dir when None
    # Base seed of inputs and weights. None: derived per evaluation from a secret per-Judge
    # salt, shared by ``cache.seed_rotation_jobs`` consecutive evaluations of a spec in a
    # worker (reference cache; not reported) -- or random per evaluation (reported) when the
    # cache is off. An int: that seed for every evaluation (reported; reproducible).
    # Not in the settings: a service judging with one fixed seed would let every candidate
    # see the same inputs.
    seed: int | None = None
    error_budget_factor: float = 10.0  # candidate error vs fp64 <= this x eager error (+ ulp floor)
    check_kernel_dependency: bool = True
    # The arithmetic audit's economy (README "Library calls"): it stops analysing launches
    # once it has found computing ones whose values reach the output; a rejection is always
    # decided by the full audit. False: the full audit for every candidate (measurements).
    audit_economy: bool = True
    profile_library_time: bool = True
    # Output strides must equal the reference's (a contiguous answer to a non-contiguous
    # reference is accepted). False: a stride mismatch is only a warning.
    strict_strides: bool = True
    # Compile the candidate's kernels side by side before its first call, from a dry run on
    # fake tensors inside the compile phase (worker/precompile.py): auto = on GPU only, on, off.
    # Off by default until bench/precompile.py has timed it on a GPU: a dry run that only adds
    # its import and fake forward to the compile clock would cost candidates, not help them.
    precompile: str = "off"
    # The precision contract of every job that names none (kernelevolve.precision):
    # default = PyTorch's defaults plus the spec's own flags, strict = IEEE float32, tf32.
    precision: str = "default"
    # The protocol an ``evaluate`` call gets unless it names one: "full" or "screen" (one
    # input set against the cached eager output, a short timing: worker/stages). A screened
    # verdict is provisional (``Verdict.tier``).
    tier: str = "full"
    # The AST policy (static_policy). Turning it off leaves only the runtime defenses:
    # meant for testing those layers, never for production (so not in the settings).
    enforce_static_policy: bool = True
    # Workers judging at once on the device (``evaluate`` from several threads, or
    # ``evaluate_many``). Timing takes the device alone (exclusive lock); everything else
    # overlaps. Each worker has its own spare and reference cache.
    parallel_workers: int = 1
    # Several GPUs of one host: entries of the backend's visibility variable
    # (CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES), one worker pinned
    # to each (more when parallel_workers is larger, round robin: gpus.pin_workers), each
    # GPU with its own device lock. Empty: every worker on ``sandbox.cuda_visible_devices``.
    gpus: tuple[str, ...] = ()
    timing: TimingOptions = field(default_factory=TimingOptions)
    cache: ReferenceCacheOptions = field(default_factory=ReferenceCacheOptions)
    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    pool: WorkerPoolOptions = field(default_factory=WorkerPoolOptions)

    def validate(self) -> None:
        """Raises ``InvalidArgumentError`` for options no Judge can run with."""
        if self.correctness_trials < 1:
            raise InvalidArgumentError("correctness_trials must be >= 1")
        if self.precision not in CONTRACTS:
            raise InvalidArgumentError(f"precision must be one of {', '.join(CONTRACTS)}")
        if self.tier not in TIERS:
            raise InvalidArgumentError(f"tier must be one of {', '.join(TIERS)}")
        if self.precompile not in ("auto", "on", "off"):
            raise InvalidArgumentError("precompile must be auto, on or off")
        if self.compile_timeout_s <= 0 or self.run_timeout_s <= 0 or self.spec_import_timeout_s <= 0:
            raise InvalidArgumentError("timeouts must be positive")
        if self.run_timeout_max_s < self.run_timeout_s:
            raise InvalidArgumentError("run_timeout_max_s must be >= run_timeout_s")
        if not self.reference_cost_factor >= 0:
            raise InvalidArgumentError("reference_cost_factor must be >= 0 (0: fixed limits)")
        for name in ("min_trials", "max_trials"):
            val = getattr(self.timing, name)
            if val is not None and val < 1:
                raise InvalidArgumentError(f"timing.{name} must be >= 1")
        if self.parallel_workers < 1:
            raise InvalidArgumentError("parallel_workers must be >= 1")
        if self.cache.seed_rotation_jobs < 1:
            raise InvalidArgumentError("cache.seed_rotation_jobs must be >= 1")
        if self.cache.limit_bytes is not None and self.cache.limit_bytes < 0:
            raise InvalidArgumentError("cache.limit_bytes must be >= 0 (or None)")
        if not 0.0 <= self.cache.fraction <= 1.0:
            raise InvalidArgumentError("cache.fraction must be within [0, 1]")
        if self.pool.memory_margin < 1.0:
            raise InvalidArgumentError("pool.memory_margin must be >= 1")


def options_from_settings(settings: EvaluatorSettings, **overrides: Any) -> EvalOptions:
    """The Judge's options for an evaluator configured by ``settings`` (YAML, ``KE_*``);
    ``overrides`` replace top-level fields (the CLI's ``--trials``)."""
    opts = EvalOptions(
        device=device_of_kind(settings.hardware_kind),
        correctness_trials=settings.correctness_trials,
        compile_timeout_s=settings.compile_timeout_s,
        run_timeout_s=settings.run_timeout_s,
        run_timeout_max_s=settings.run_timeout_max_s,
        reference_cost_factor=settings.reference_cost_factor,
        precision=settings.precision,
        spec_import_timeout_s=settings.spec_import_timeout_s,
        scratch_dir=settings.scratch_dir or None,
        parallel_workers=max(1, settings.parallel_workers),
        timing=settings.timing,
        cache=settings.cache,
        sandbox=settings.sandbox,
        pool=settings.pool,
    )
    return dataclasses.replace(opts, **overrides) if overrides else opts


# -- hardware ----------------------------------------------------------------------------------
# Settings' hardware kinds and the Judge device they mean: the device backend registry's
# kinds (nvidia[-*] -> cuda, amd[-*] -> rocm, cpu/x86 -> cpu, and any registered). Any other
# kind is a pool label (README, "Configuration") and is judged on the CPU, as the service
# and the CLI always did.


def cuda_available() -> bool:
    """Whether torch sees a GPU through its ``torch.cuda`` API (CUDA or HIP build)."""
    try:
        return backends.get_backend("cuda").available()
    except ImportError:  # no torch in this process
        return False


def _hip_build() -> bool:
    import torch

    return torch.version.hip is not None


def device_of_kind(kind: str) -> str:
    """The Judge device for a settings hardware kind ("auto" stays "auto")."""
    if kind == "auto":
        return "auto"
    return backends.backend_for_kind(kind) or "cpu"


def resolve_hardware_kind(kind: str) -> str:
    """The hardware kind an evaluator serves: "auto" becomes "nvidia" ("amd" on torch's HIP
    build) when a GPU is visible, else "cpu"; any other kind is kept (a Judge built for it
    checks that its device exists)."""
    if kind == "auto":
        if not cuda_available():
            return "cpu"
        return "amd" if _hip_build() else "nvidia"
    return kind


def resolve_device(device: str) -> str:
    """A Judge's device backend: "auto" becomes "cuda" ("rocm" on torch's HIP build) when a
    GPU is visible, else "cpu"; a named backend must be registered and see its device."""
    if device == "cpu":
        return device
    if device == "auto":
        if not cuda_available():
            return "cpu"
        return "rocm" if _hip_build() else "cuda"
    if device == "cuda":
        if not cuda_available():
            raise InvalidArgumentError("EvalOptions.device='cuda' but no CUDA device is available")
        return device
    if device not in backends.names():
        raise InvalidArgumentError(f"EvalOptions.device must be 'auto' or a device backend "
                                   f"({', '.join(backends.names())}), got {device!r}")
    if not backends.get_backend(device).available():
        raise InvalidArgumentError(f"EvalOptions.device={device!r} but no such device is available")
    return device


def host_gpus(settings: EvaluatorSettings, hardware_kind: str) -> tuple[str, ...]:
    """The GPUs this evaluator pins its workers to (``evaluator.gpus``); none on CPU. Here, not in
    the service's composition root, so that a benchmark builds its Judge as the service does
    without the service's gRPC stack."""
    name = device_of_kind(hardware_kind)
    if not settings.gpus or name in ("auto", "cpu"):
        return ()
    backend = backends.get_backend(name)
    if not backend.accelerated:
        return ()
    visible = visible_gpus(backend.visible_devices(os.environ), backend.device_count())
    return tuple(select_gpus(settings.gpus, visible))
