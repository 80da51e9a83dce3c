"""What the stages of one job share: the worker's harness, the job's options and verdict,
and the objects one stage hands to the next (the reference model, the candidate, trial 0's
set and output, the kernels seen)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from kernelevolve.ports.verdict import Correctness, Diagnosis, Verdict

from ...backends import DeviceBackend
from ...device_lock import Mode
from ...phase_limits import ReferenceCost
from .. import defenses, launch_counter, loading, memory, reference_cache
from ..defenses import Outcome, exc_summary
from ..global_state import GlobalState
from ..options import JobOptions, PhaseFn

# Bound before any candidate code runs (a candidate cannot swap it for the measure phase).
clock = time.perf_counter
Evidence = dict[str, Any]


class Harness(Protocol):
    """The worker's side of a job (``evaluation.Evaluator``): device, lock, calls, caches."""

    scratch: str
    device: torch.device
    backend: DeviceBackend
    fingerprint: dict[str, str]
    counter: int
    spec_cache: dict[str, loading.LoadedSpec]
    flops_cache: dict[tuple[str, str], tuple[float, int]]
    _mem: memory.JobMemory
    _refs: reference_cache.JobReferences | None
    _before: GlobalState | None
    _forward_seed: int
    _last_call_drew: bool
    _reference_draws: bool
    _float64_notes: list[str]

    def poison(self, like: list[Any]) -> None: ...
    def _note_output_sizes(self, ref: Any) -> None: ...
    def _call(self, model: torch.nn.Module, inputs: list[Any]) -> Any: ...
    def _hold(self, mode: Mode | None) -> None: ...
    def _step_aside(self) -> None: ...
    def _unlocked(self) -> AbstractContextManager[None]: ...
    def _precompile(self, opts: JobOptions, source: str, module_name: str, directory: str, init: list[Any],
                    inputs: list[Any]) -> dict[str, Any]: ...
    def _references(self, opts: JobOptions, spec: loading.LoadedSpec, init: list[Any],
                    cacheable: bool) -> reference_cache.JobReferences: ...
    def _float64_reference(self, ref_model: torch.nn.Module, inputs: list[Any]) -> Any: ...
    def _reference_on(self, ref_model: torch.nn.Module, inputs: list[Any]) -> Any: ...
    def _measure_reference(self, spec: loading.LoadedSpec, ref_model: torch.nn.Module, seed: int,
                           build_s: float) -> ReferenceCost: ...
    def _check_state(self, before: GlobalState) -> None: ...
    def _time(self, spec: loading.LoadedSpec, ref_model: torch.nn.Module, cand_model: torch.nn.Module,
              opts: JobOptions, v: Verdict, seed: int) -> None: ...


@dataclass
class JobContext:
    """One job. Filled stage by stage; a stage reads only what an earlier one set. A large
    object is set to None by the stage that reads it last (memory: README "Memory")."""

    ev: Harness
    job: dict[str, Any]
    opts: JobOptions
    v: Verdict
    phase: PhaseFn
    # wall seconds per stage (``v.evidence["stage_s"]``), for tuning the harness itself
    stage_s: dict[str, float] = field(default_factory=dict)
    _mark: float = field(default_factory=clock)
    # load
    jobdir: str = ""
    spec: Any = None  # loading.LoadedSpec
    seed: int = 0
    fresh_seed: int = 0  # per-job secret (trial 1, extra and timing sets with shared seeds)
    init: list[Any] = field(default_factory=list)
    ref_model: Any = None  # torch.nn.Module
    refs: Any = None  # reference_cache.JobReferences
    before: Any = None  # GlobalState after the reference ran, before the candidate is imported
    # compile
    mod_name: str = ""
    cls: Any = None  # the candidate's ModelNew
    cand_model: Any = None
    recorder: Any = None  # launch_counter.LaunchRecorder
    # input sets whose inputs the candidate updated in place as the reference does
    inputs_updated: set[str] = field(default_factory=set)
    graph_seen: list[int] = field(default_factory=lambda: [0, 0])  # CUDA graph replays, launches they stood for
    inputs0: Any = None  # trial 0's set (on the host after the correctness stage)
    first_in: Any = None  # the candidate's copy of trial 0's set, kept for trial 1's buffers
    first_out: Any = None
    kernel_launches: dict[str, int] = field(default_factory=dict)
    kernel_meta: dict[str, tuple[int, int, int]] = field(default_factory=dict)
    # correctness
    corr: Correctness = field(default_factory=lambda: Correctness(trials=0))
    ref_out0: Any = None  # trial 0's reference output, for the probes
    out_shapes: list[Any] = field(default_factory=list)
    # diagnosis
    bytes_moved: float = 0.0
    flops: float = 0.0
    heavy_ops: int = 0
    diag: Diagnosis | None = None

    def __post_init__(self) -> None:
        self.v.evidence["stage_s"] = self.stage_s

    @property
    def device(self) -> torch.device:
        return self.ev.device

    def lap(self, name: str) -> None:
        """Close a stage: its wall seconds and its memory peak (for the footprint)."""
        now = clock()
        self.stage_s[name] = round(self.stage_s.get(name, 0.0) + now - self._mark, 4)
        self._mark = now
        self.ev._mem.mark(name)

    def run_candidate(self, inputs: list[Any], label: str) -> Any:
        """One candidate call: allocator poisoned, launches counted, process state checked
        before anything of ours runs again, at least one kernel of its own launched."""
        ev, recorder = self.ev, self.recorder
        recorder.reset()
        ev.poison(inputs)
        try:
            with launch_counter.recording(recorder):
                out = ev._call(self.cand_model, inputs)
        except Exception as exc:  # noqa: BLE001
            status = "compile_error" if defenses.is_compile_error(exc) else "runtime_error"
            raise Outcome(status, f"candidate forward raised ({label}): {exc_summary(exc)}") from None
        # After every candidate call, before anything of ours runs again (the reference
        # included): flags, hooks, modes, timers and threads must be as they were.
        ev._check_state(self.before)
        if recorder.total_own() == 0:
            foreign = f"; other kernels launched: {sorted(recorder.foreign)}" if recorder.foreign else ""
            graph = (f"; {recorder.graph_replays} CUDA graph replay(s) of no kernel of its own"
                     if recorder.graph_replays else "")
            raise Outcome("rejected", f"no Triton kernel defined by the candidate launched ({label}){foreign}"
                                      f"{graph}")
        self.graph_seen[0] += recorder.graph_replays
        self.graph_seen[1] += recorder.replayed_launches
        return out


StageFn = Callable[[JobContext], Evidence | None]
