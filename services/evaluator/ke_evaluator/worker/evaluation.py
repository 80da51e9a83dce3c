"""Judging one candidate inside the worker: the stages of ``stages.PIPELINE`` (load,
compile, correctness, integrity, flops, library_profile, timing, diagnosis) on one job,
and the helpers they share (calls, the device lock, references, float64, timing).

Order of events matters for the defenses (see README.md):
  measure  (a spec's first job on a Judge) the reference's own cost: one call on an input
           set no trial uses and its float64 run, before the candidate is imported
           (phase_limits: the later phases' limits grow with it);
  compile  import the candidate, construct both models (same seed, weights copied),
           first candidate call on input set 0 (Triton JIT compile happens here);
  run      per trial: seeded inputs (cached per spec and seed, see reference_cache.py) ->
           poison allocator -> candidate on clones (launches counted) -> reference on
           clones (or its cached output) -> structure/value/error checks;
           trial 0 adds candidate -> reference -> candidate (determinism, stale memory);
           trial 1 rewrites trial 0's buffers in place with new values (address-keyed
           caches; never cached with shared seeds); extra shape sets; kernel-dependency
           check; global-state checks; timing.
Device lock (device_lock.py): SHARED from the compile phase through profiling, EXCLUSIVE
for timing, so parallel workers on one device never run work inside a timed sample.
Between trials a SHARED holder steps aside for a waiting timer, and Triton compiles run
with the lock released (compile_release.py): the CPU compiles while the GPU times.
Candidate faults never raise out of here: they become a verdict dict.
Worker side: torch + triton only.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from kernelevolve.ports.verdict import Timing, Verdict

from ..backends import DeviceBackend, for_torch_device
from ..device_lock import DeviceLock, Mode
from ..phase_limits import ReferenceCost
from . import (
    defenses,
    graph_ledger,
    loading,
    memory,
    output_checks,
    precompile,
    reference_cache,
    stages,
    timing,
    tolerance,
)
from .compile_release import CompileRelease
from .defenses import Outcome, exc_summary
from .global_state import GlobalState, set_precision_flags, snapshot, state_violations
from .options import JobOptions, PhaseFn

# Bound before any candidate code runs (a candidate cannot swap it for the measure phase).
_clock = time.perf_counter
# Seed offset of the measure phase's input set: no trial, extra or timing set uses it, so
# the reference's answer it leaves in freed memory is for inputs the candidate never gets.
_MEASURE_SEED = 7000
__all__ = ["Evaluator", "JobOptions", "PhaseFn"]


class Evaluator:
    """Per-worker state: loaded specs, reference cache, device lock, counters."""

    def __init__(self, scratch: str, device: torch.device, fingerprint: dict[str, str],
                 lock: DeviceLock | None = None, compile_release: CompileRelease | None = None,
                 backend: DeviceBackend | None = None) -> None:
        self.scratch = scratch
        self.device = device
        self.backend = backend if backend is not None else for_torch_device(device)
        self.fingerprint = fingerprint
        self.lock = lock
        self.compile_release = compile_release  # lets the lock go while Triton compiles
        self.spec_cache: dict[str, loading.LoadedSpec] = {}
        # Inputs, eager and float64 references per (spec sha, seed, init digest); built on the
        # first job (its options carry the cap).
        self.ref_cache: reference_cache.RefCache | None = None
        self.flops_cache: dict[tuple[str, str], tuple[float, int]] = {}  # (FLOPs, heavy ops) of the reference
        # The eager baseline's timing per (spec, input shapes, device): a screen reuses it
        # instead of timing the reference again for every candidate.
        self.baselines = reference_cache.BaselineTimes()
        self.counter = 0
        # Byte sizes of reference outputs seen in this worker: the sizes a candidate's output
        # allocation will request, poisoned before every candidate call.
        self._output_sizes: set[int] = set()
        self._before: GlobalState | None = None
        self._refs: reference_cache.JobReferences | None = None  # the running job's view of ref_cache
        self._mem = memory.JobMemory(torch.device("cpu"))  # the running job's memory measurement
        # Every forward call of a job starts from this generator state (loading.seed_forward):
        # the reference, the candidate and the float64 re-run draw the same dropout masks.
        self._forward_seed = 0
        self._last_call_drew = False  # whether the last ``_call`` drew random numbers
        self._reference_draws = False  # whether the running job's reference drew any
        self._float64_notes: list[str] = []  # the float64 run's replay of those draws, when it failed
        graph_ledger.install()  # a CUDA graph replay stands for the launches it captured

    # -- helpers ---------------------------------------------------------------------------
    def poison(self, like: list[Any]) -> None:
        defenses.poison_allocator(self.device, like, self._output_sizes)

    def _note_output_sizes(self, ref: Any) -> None:
        if len(self._output_sizes) < 64:
            self._output_sizes |= {t.numel() * t.element_size() for t in output_checks.leaves(ref)
                                   if isinstance(t, torch.Tensor)}

    def _call(self, model: torch.nn.Module, inputs: list[Any]) -> Any:
        with torch.no_grad():
            out, self._last_call_drew = loading.seeded_call(model, inputs, self._forward_seed, self.device)
        if self.backend.accelerated:
            self.backend.synchronize()
        else:
            # Triton's interpreter keeps every launch's arguments in reference cycles (its
            # recursive argument-copying closures) until the collector runs: three 32 MiB
            # input sets were still held at the end of the correctness phase. The young
            # generations are enough, and cheap.
            gc.collect(1)
        return out

    def _hold(self, mode: Mode | None) -> None:
        """Device lock: SHARED for work that may overlap other workers', EXCLUSIVE for
        timing, None to release. The parent stops the phase clock while we wait."""
        if self.lock is None:
            return
        if mode is None:
            self.lock.release()
        else:
            self.lock.acquire(mode)

    def _precompile(self, opts: JobOptions, source: str, module_name: str, directory: str, init: list[Any],
                    inputs: list[Any]) -> dict[str, Any]:
        why = precompile.wanted(opts.precompile, self.backend.accelerated)
        if why:
            return precompile.DryRun(reason=why).evidence()
        paused = self.compile_release.pause if self.compile_release is not None else contextlib.nullcontext
        return precompile.dry_run(source, module_name, directory, "ModelNew", init, inputs,
                                  device=self.device, accelerated=self.backend.accelerated, call=self._call,
                                  unlocked=self._unlocked,
                                  paused=paused).evidence()

    @contextlib.contextmanager
    def _unlocked(self) -> Iterator[None]:
        """The SHARED lock let go (drained first) while no candidate code runs."""
        held = self.lock is not None and self.lock.mode == "shared"
        if held:
            self._hold(None)
        try:
            yield
        finally:
            if held:
                self._hold("shared")

    def _step_aside(self) -> None:
        """Between two steps of the SHARED phase: a waiting timing phase goes first (the
        release drains our queued work, see ``DeviceLock.drain``)."""
        if self.lock is not None:
            self.lock.step_aside()

    def _references(self, opts: JobOptions, spec: loading.LoadedSpec, init: list[Any],
                    cacheable: bool) -> reference_cache.JobReferences:
        if cacheable and self.ref_cache is None:
            limit = reference_cache.resolve_limit(opts.reference_cache_bytes, opts.reference_cache_fraction,
                                                  self.device, self.backend)
            self.ref_cache = reference_cache.RefCache(limit)
        cache = self.ref_cache if cacheable and self.ref_cache is not None and self.ref_cache.limit_bytes > 0 else None
        assert opts.seed is not None
        # One contract's eager references are never another's.
        key = (f"{spec.sha}:{opts.precision}", opts.seed,
               reference_cache.init_digest(init) if cache is not None else "")
        # On a device, a large input set is not kept between jobs (made again from its seed):
        # the cache holds references on the host, never a second set on the device.
        regenerate = memory.HOST_SPILL_BYTES if self.backend.accelerated else None
        # A screen reads one set: it verifies only that (reference_cache.JobReferences).
        reads = (reference_cache.SCREEN_SET,) if opts.tier == "screen" else None
        return reference_cache.JobReferences(cache, key, shared=opts.seed_shared, regenerate_bytes=regenerate,
                                             reads=reads)

    def _keep_screen_reference(self, refs: reference_cache.JobReferences, job_memory: dict[str, Any]) -> str:
        """The screen set's eager output stays on the device between jobs while it fits
        (``reference_cache.keep_on_device``): screens then compare and checksum it there.
        Runs after the job, its tensors gone, under the shared device lock (a copy of up to
        gigabytes should not overlap another worker's timing phase)."""
        if not self.backend.accelerated or self.ref_cache is None:
            return ""
        cache = self.ref_cache

        def fits(nbytes: int, resident: int) -> bool:
            free, _total = memory.device_info(self.device, self.backend)
            try:
                slack = self.backend.memory_reserved(self.device) - self.backend.memory_allocated(self.device)
            except RuntimeError:
                slack = 0
            peak = int(job_memory.get("job_peak_bytes", 0) or 0)
            return reference_cache.keep_on_device(
                nbytes, resident_bytes=resident, budget_bytes=cache.limit_bytes, available_bytes=free + max(0, slack),
                reserve_bytes=int(peak * reference_cache.DEVICE_RESERVE_FACTOR))

        self._hold("shared")
        try:
            return refs.keep_on(reference_cache.SCREEN_SET, fits, lambda t: memory.copy_to(t, self.device))
        except (RuntimeError, MemoryError):  # no room after all: it waits on the host, as before
            return "on the host (the copy to the device failed)"
        finally:
            self._hold(None)

    # -- the job ---------------------------------------------------------------------------
    def evaluate(self, job: dict[str, Any], phase: PhaseFn) -> dict[str, Any]:
        opts = JobOptions.from_dict(job.get("options", {}))
        v = Verdict(status="correct", reason="", candidate_id=job.get("candidate_id", ""),
                    device=self.device.type, interpreted=not self.backend.accelerated,
                    fingerprint=dict(self.fingerprint))
        if v.interpreted:
            v.warnings.append("CPU run in the Triton interpreter: timings say nothing about GPU speed")
        self._refs = None
        if self.lock is not None:
            self.lock.reset_stats()
        compiles_unlocked = self.compile_release.released if self.compile_release is not None else 0
        self._mem = memory.JobMemory(self.device, self.backend)
        try:
            self._evaluate(job, opts, v, phase)
        except Outcome as o:
            v.status = o.status  # type: ignore[assignment]
            v.reason = o.reason
        except loading.SpecError as exc:
            return {"spec_error": str(exc)}
        except MemoryError as exc:
            v.status, v.reason = "runtime_error", f"out of memory: {exc}"
        except Exception as exc:  # noqa: BLE001 - anything left is the candidate's runtime fault
            v.status, v.reason = "runtime_error", f"evaluation failed: {exc_summary(exc)}"
        finally:
            self._hold(None)
            refs = self._refs
            if refs is not None:
                v.evidence["reference_cache"] = refs.finish()
                self._refs = None
        if self.lock is not None:
            v.evidence["device_lock"] = self.lock.evidence()
            if self.compile_release is not None:
                v.evidence["device_lock"]["compiles_unlocked"] = self.compile_release.released - compiles_unlocked
        if v.status != "correct":
            v.speedup = 0.0
        # For the Judge's admission (footprint of the spec) and its out-of-memory re-run.
        v.evidence["memory"] = self._mem.report()
        if v.status == "runtime_error" and memory.out_of_memory(v.reason):
            v.evidence["out_of_memory"] = True
        # After the job's memory report: the copy is the cache's, not the job's footprint.
        placed = self._keep_screen_reference(refs, v.evidence["memory"]) if refs is not None else ""
        if placed:
            v.evidence["reference_cache"]["screen_reference"] = placed
        return v.to_dict()

    def _evaluate(self, job: dict[str, Any], opts: JobOptions, v: Verdict, phase: PhaseFn) -> None:
        """The protocol: ``stages.PIPELINE`` in order, on one job's context."""
        self.counter += 1
        stages.run_pipeline(stages.JobContext(ev=self, job=job, opts=opts, v=v, phase=phase))

    def _float64_device(self, inputs: list[Any]) -> torch.device:
        """Where the float64 reference runs: on the device when its float64 copies fit beside
        what the job holds (the inputs and the reference's peak, widened to 8 bytes an
        element), else on the host."""
        on_device = memory.float64_fits(self._mem.parts, inputs, self.device, self.backend)
        return self.device if on_device else torch.device("cpu")

    def _float64_reference(self, ref_model: torch.nn.Module, inputs: list[Any]) -> Any:
        """The reference re-run in float64 (tolerance.py, rules 2 and 3), where
        ``_float64_device`` says; a large result waits on the host, where the comparison
        reads it chunk by chunk."""
        out = reference_cache.float64_reference(ref_model, inputs, self._float64_device(inputs),
                                                seed=self._forward_seed,
                                                draws_on=self.device if self._reference_draws else None,
                                                notes=self._float64_notes, unlocked=self._unlocked)
        return memory.to_host(out, self.backend)

    def _measure_reference(self, spec: loading.LoadedSpec, ref_model: torch.nn.Module, seed: int,
                           build_s: float) -> ReferenceCost:
        """The reference's own cost, as the run phase will pay it: one input set made, one
        call on clones of it (a large output moved to the host), one comparison of an
        output with it, its float64 run (``phase_limits``). Runs before the job imports the
        candidate, on a set no trial uses, and never from the reference cache; its memory is
        gone before trial 0's set is made."""
        t0 = _clock()
        inputs = spec.inputs(seed + _MEASURE_SEED, self.device)
        self.backend.synchronize()
        t1 = _clock()
        extra_sets = len(spec.extra_inputs(seed + _MEASURE_SEED + 1, self.device))
        t2 = _clock()
        with self._mem.reference():
            out = self._call(ref_model, output_checks.clone_tree(inputs))
        ref = memory.to_host(out, self.backend)
        t3 = _clock()
        set_precision_flags()
        # A candidate's output on the device against the reference's, as every set compares.
        tolerance.compare_values(out, ref, spec.tolerance)
        t4 = _clock()
        # What the float64 run's placement reads (as trial 0 notes it in the run phase).
        self._mem.note(inputs, ref_model, out)
        # Its output's memory is freed now: poisoned before the candidate's first call too.
        self._note_output_sizes(out)
        del out, ref
        where = self._float64_device(inputs)
        t5 = _clock()
        out64 = self._float64_reference(ref_model, inputs)
        self.backend.synchronize()
        t6 = _clock()
        set_precision_flags()
        del out64, inputs
        return ReferenceCost(eager_s=t3 - t2, float64_s=t6 - t5, inputs_s=t1 - t0, build_s=build_s,
                             check_s=t4 - t3, extra_sets=extra_sets,
                             float64_on="host" if where.type == "cpu" else "device")

    def _reference_on(self, ref_model: torch.nn.Module, inputs: list[Any]) -> Any:
        """The reference on inputs no trial used (the arithmetic audit's off-identity check)."""
        out = self._call(ref_model, inputs)
        set_precision_flags()
        return out

    # -- individual defenses ---------------------------------------------------------------
    def _check_state(self, before: GlobalState) -> None:
        problems = state_violations(before, snapshot(), count_os_threads=not self.backend.accelerated)
        if problems:
            set_precision_flags()
            raise Outcome("rejected", "candidate changed process state: " + "; ".join(problems))

    def _compiled_baseline(self, spec: loading.LoadedSpec, ref_model: torch.nn.Module, inputs: list[Any],
                           v: Verdict) -> Callable[..., Any] | None:
        """torch.compile of the reference (GPU only). Dynamo's code cache and the on-disk
        Inductor/Triton caches make later jobs of the same spec cheap; failures only note."""
        if not self.backend.accelerated:
            v.evidence["compile_baseline"] = "skipped: CPU (the interpreter timing says nothing anyway)"
            return None
        try:
            compiled = torch.compile(ref_model)
            with torch.no_grad():
                check = compiled(*output_checks.clone_tree(inputs))
                ref = ref_model(*output_checks.clone_tree(inputs))
            set_precision_flags()
            if not tolerance.compare_values(check, ref, spec.tolerance).ok:
                v.evidence["compile_baseline"] = "skipped: torch.compile output differs from eager"
                return None
            v.evidence["compile_baseline"] = "torch.compile (inductor)"
            # Inductor starts compile-worker threads of its own: count from here on.
            if self._before is not None:
                now = snapshot()
                self._before.py_threads = max(self._before.py_threads, now.py_threads)
                self._before.os_threads = max(self._before.os_threads, now.os_threads)
            return compiled
        except Exception as exc:  # noqa: BLE001 - the baseline is optional
            v.evidence["compile_baseline"] = f"skipped: torch.compile failed ({type(exc).__name__}: {exc})"[:300]
            return None

    def _time(self, spec: loading.LoadedSpec, ref_model: torch.nn.Module, cand_model: torch.nn.Module,
              opts: JobOptions, v: Verdict, seed: int) -> None:
        """The candidate timed against the eager reference. Full tier: interleaved with it on
        up to ``timing_input_sets`` sets, the strict policy; its baseline timing is kept
        (``reference_cache.BaselineTimes``). Screen tier: one set, the short policy, and the
        baseline a job of the same spec and shapes timed before in this worker (timed now
        when there is none)."""
        dev = self.device
        screen = opts.tier == "screen"
        sets = [spec.inputs(seed + 9000, dev)]
        # Each timing set lives twice (values and their source): as many as half the free
        # device memory holds and memory.TIMING_SETS_BYTES allows, up to the option (3 sets
        # of a 12 GB input were 72 GB).
        wanted = 1 if screen else max(1, opts.timing_input_sets)
        sets += [spec.inputs(seed + 9000 + i, dev)
                 for i in range(1, memory.timing_sets(wanted, memory.tensor_bytes(sets[0]), dev,
                                                      backend=self.backend))]
        if screen:
            most = max(1, min(opts.screen_max_timing_trials, opts.max_timing_trials))
            policy = timing.TimingPolicy(min_trials=min(opts.min_timing_trials, most), max_trials=most,
                                         ci_target=opts.timing_ci_target,
                                         budget_s=min(opts.screen_timing_budget_s, opts.timing_budget_s))
        else:
            policy = timing.TimingPolicy(min_trials=opts.min_timing_trials, max_trials=opts.max_timing_trials,
                                         ci_target=opts.timing_ci_target, budget_s=opts.timing_budget_s)
        # One contract's eager timing is never another's (cuDNN TF32 moves eager 1.8-5.5x).
        bkey = reference_cache.BaselineTimes.key(f"{spec.sha}:{opts.precision}", sets[0],
                                                 self.fingerprint.get("device_name", dev.type))
        cached = self.baselines.get(bkey) if screen else None

        def base(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return ref_model(*inputs)

        def cand(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return cand_model(*inputs)

        contestants: list[Callable[[list[Any]], Any]] = [cand] if cached is not None else [base, cand]
        compiled = (self._compiled_baseline(spec, ref_model, sets[0], v)
                    if opts.compile_baseline and not screen else None)
        # From here to the end of the timing no other worker may use the device (the timer
        # calibrates on it too).
        self._hold("exclusive")
        timer = timing.Timer(dev, self.backend)
        if compiled is not None:

            def comp(inputs: list[Any]) -> Any:
                with torch.no_grad():
                    return compiled(*inputs)

            contestants.append(comp)
        sources = [output_checks.clone_tree(s) for s in sets]

        def refresh(idx: int, k: int) -> None:
            # Same buffers, new values every round (the source values scaled by a round-unique
            # factor): a cache keyed on pointers or on input values never hits while timed.
            scale = 1.0 + (k + 1) * 2.0**-12
            if not self.backend.accelerated:
                gc.collect(1)  # the interpreter's cycles (see _call), outside the timed region
            with torch.no_grad():
                for dst, src in zip(output_checks.leaves(sets[idx]), output_checks.leaves(sources[idx]), strict=False):
                    if isinstance(dst, torch.Tensor) and dst.is_floating_point():
                        dst.copy_(src).mul_(scale)

        parts: list[tuple[list[float], list[float]]] = []
        samples = timing.interleaved_many(contestants, sets, timer, policy, refresh=refresh, parts=parts)
        if cached is None:
            baseline = timing.summarize(samples[0], *parts[0])
            samples, parts = samples[1:], parts[1:]
            self.baselines.put(bkey, baseline)
            source = "timed in this job, interleaved with the candidate"
        else:
            baseline = cached
            source = "timed by an earlier job of this spec and input shapes in this worker"
        v.baseline_timing = Timing(**baseline)
        v.candidate_timing = Timing(**timing.summarize(samples[0], *parts[0]))
        if v.candidate_timing.median_ms > 0:
            v.speedup = v.baseline_timing.median_ms / v.candidate_timing.median_ms
        if compiled is not None:
            v.compile_baseline_timing = Timing(**timing.summarize(samples[1], *parts[1]))
            if v.candidate_timing.median_ms > 0:
                v.speedup_vs_compile = v.compile_baseline_timing.median_ms / v.candidate_timing.median_ms
        per_call = (v.baseline_timing.per_call_median_ms / v.candidate_timing.per_call_median_ms
                    if v.candidate_timing.per_call_median_ms > 0 else None)
        v.evidence["timing"] = {"input_sets": len(sets), "input_sets_wanted": wanted, "fresh_values_each_round": True,
                                "l2_flush": timer.flushes, "speedup_per_call": per_call, "clock": self.backend.clock,
                                "spin_shorter_than_host": timer.spin_short, "baseline": source,
                                "policy": "screen" if screen else "full"}
