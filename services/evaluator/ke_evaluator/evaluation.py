"""Judging one candidate inside the worker: compile, correctness, integrity, timing.

Order of events matters for the defenses (see README.md):
  compile  import the candidate, construct both models (same seed, weights copied),
           first candidate call on input set 0 (Triton JIT compile happens here);
  run      per trial: fresh seeded inputs -> poison allocator -> candidate on clones
           (launches counted) -> reference on clones -> structure/value/error checks;
           trial 0 adds candidate -> reference -> candidate (determinism, stale memory);
           trial 1 rewrites trial 0's buffers in place (address-keyed caches);
           extra shape sets; kernel-dependency check; global-state checks; timing.
Candidate faults never raise out of here: they become a verdict dict.
Worker side: torch + triton only.
"""

from __future__ import annotations

import copy
import os
import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import compare, diagnosis, launches, specs, timing
from .integrity import GlobalState, set_precision_flags, snapshot, state_violations
from .verdict import Correctness, Diagnosis, KernelInfo, Timing, Verdict

PhaseFn = Callable[[str], None]


class Outcome(Exception):
    """Ends an evaluation early with a final status."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass
class JobOptions:
    device: str = "cpu"
    correctness_trials: int = 5
    # None: a random base seed per job (recorded in the evidence). Freed memory of an
    # earlier job in the same worker then never holds the answer for this job's inputs.
    seed: int | None = None
    time_candidates: bool = True
    min_timing_trials: int = 3
    max_timing_trials: int = 10
    timing_ci_target: float = 0.02
    timing_budget_s: float = 30.0
    timing_input_sets: int = 3
    error_budget_factor: float = 10.0
    check_kernel_dependency: bool = True
    profile_library_time: bool = True
    compile_baseline: bool = False
    strict_strides: bool = True

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobOptions:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def _exc_summary(exc: BaseException, limit: int = 6) -> str:
    """``Type: message`` plus the candidate's own frames (file paths are the worker's, useless
    to a reader; line numbers inside candidate.py are what a synthesizer can act on)."""
    head = f"{type(exc).__name__}: {exc}"[:600]
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "_ke_candidate_" in (f.filename or "")]
    if not frames:
        return head
    where = "; ".join(f"candidate.py line {f.lineno} in {f.name}: {(f.line or '').strip()[:80]}"
                      for f in frames[-limit:])
    return f"{head} [at {where}]"


def _is_compile_error(exc: BaseException) -> bool:
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct"})


class Evaluator:
    """Per-worker state: loaded specs, float64 reference cache, counters."""

    def __init__(self, scratch: str, device: torch.device, fingerprint: dict[str, str]) -> None:
        self.scratch = scratch
        self.device = device
        self.fingerprint = fingerprint
        self.spec_cache: dict[str, specs.LoadedSpec] = {}
        # float64 reference outputs per (spec sha, input key): expensive (fp64 on CPU), reused.
        self.ref64_cache: dict[tuple[str, str], Any] = {}
        self.flops_cache: dict[tuple[str, str], float] = {}
        self.counter = 0
        # Byte sizes of reference outputs seen in this worker: the sizes a candidate's output
        # allocation will request, poisoned before every candidate call.
        self._output_sizes: set[int] = set()
        self._before: GlobalState | None = None

    # -- helpers ---------------------------------------------------------------------------
    def poison(self, like: list[Any]) -> None:
        """Make fresh allocations hold NaN rather than a stale answer.

        CUDA: allocate NaN-filled blocks of the sizes about to be requested plus a large
        block, then free them: the caching allocator hands the same memory to the next
        ``torch.empty``. CPU: several NaN blocks per size, freed together, so malloc's LIFO
        bins serve the next requests of those sizes from NaN memory; allocations above
        glibc's mmap threshold come from fresh zeroed pages (no stale data, but zeros).
        Sizes: the tensors about to be passed plus every output size seen for the spec.
        """
        sizes = {t.numel() * t.element_size() for t in compare.leaves(like) if isinstance(t, torch.Tensor)}
        sizes |= self._output_sizes
        copies = 1
        if self.device.type == "cuda":
            sizes.add(64 * 1024 * 1024)
        else:
            copies = 8
        bufs = []
        for nbytes in sorted(sizes):
            n = max(1, nbytes // 4)
            for _ in range(copies):
                bufs.append(torch.full((n,), float("nan"), dtype=torch.float32, device=self.device))
        del bufs

    def _call(self, model: torch.nn.Module, inputs: list[Any]) -> Any:
        with torch.no_grad():
            out = model(*inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    def ref64(self, spec: specs.LoadedSpec, ref_model: torch.nn.Module, key: str, inputs: list[Any]) -> Any:
        ck = (spec.sha, key + f"@{self.device.type}")
        if ck not in self.ref64_cache:
            # On the evaluation device: a GPU's float64 units do in milliseconds what the host
            # needs seconds for at GPU-scale sizes, and seeds differ per evaluation, so this
            # runs for every candidate. Falls back to the host if the device cannot do it.
            try:
                m64 = copy.deepcopy(ref_model).to(device=self.device, dtype=torch.float64)
                in64 = compare.upcast64(specs.to_device(inputs, self.device))
                with torch.no_grad():
                    self.ref64_cache[ck] = m64(*in64)
            except (RuntimeError, NotImplementedError):
                m64 = copy.deepcopy(ref_model).to(device="cpu", dtype=torch.float64)
                in64 = compare.upcast64(specs.to_device(inputs, torch.device("cpu")))
                with torch.no_grad():
                    self.ref64_cache[ck] = m64(*in64)
            if len(self.ref64_cache) > 64:
                self.ref64_cache.pop(next(iter(self.ref64_cache)))
        return self.ref64_cache[ck]

    # -- the job ---------------------------------------------------------------------------
    def evaluate(self, job: dict[str, Any], phase: PhaseFn) -> dict[str, Any]:
        opts = JobOptions.from_dict(job.get("options", {}))
        v = Verdict(status="correct", reason="", candidate_id=job.get("candidate_id", ""),
                    device=self.device.type, interpreted=self.device.type == "cpu",
                    fingerprint=dict(self.fingerprint))
        if v.interpreted:
            v.warnings.append("CPU run in the Triton interpreter: timings say nothing about GPU speed")
        try:
            self._evaluate(job, opts, v, phase)
        except Outcome as o:
            v.status = o.status  # type: ignore[assignment]
            v.reason = o.reason
        except specs.SpecError as exc:
            return {"spec_error": str(exc)}
        except MemoryError as exc:
            v.status, v.reason = "runtime_error", f"out of memory: {exc}"
        except Exception as exc:  # noqa: BLE001 - anything left is the candidate's runtime fault
            v.status, v.reason = "runtime_error", f"evaluation failed: {_exc_summary(exc)}"
        if v.status != "correct":
            v.speedup = 0.0
        return v.to_dict()

    def _evaluate(self, job: dict[str, Any], opts: JobOptions, v: Verdict, phase: PhaseFn) -> None:
        dev = self.device
        self.counter += 1
        # Wall seconds per stage, for tuning the harness itself (not part of any verdict).
        stages: dict[str, float] = {}
        v.evidence["stage_s"] = stages
        mark = [time.perf_counter()]

        def lap(name: str) -> None:
            now = time.perf_counter()
            stages[name] = round(stages.get(name, 0.0) + now - mark[0], 4)
            mark[0] = now
        jobdir = os.path.join(self.scratch, "jobs")
        spec = specs.load_spec(job["spec_source"], job.get("spec_name", ""), jobdir, self.spec_cache)
        if opts.seed is None:
            opts.seed = random.SystemRandom().randrange(1 << 30)
        v.evidence["seed"] = opts.seed
        phase("compile")
        set_precision_flags()
        before = snapshot()
        self._before = before
        init = spec.init_inputs()
        ref_model = specs.build_model(spec.Model, init, opts.seed, dev)

        # ---- compile: import + construct + first call ---------------------------------------
        mod_name = f"_ke_candidate_{os.getpid()}_{self.counter}"
        try:
            mod = specs.import_source(job["candidate_source"], mod_name, jobdir)
        except SyntaxError as exc:
            raise Outcome("compile_error", f"syntax error at line {exc.lineno}: {exc.msg}") from None
        except Exception as exc:  # noqa: BLE001
            raise Outcome("compile_error", f"candidate module raised on import: {_exc_summary(exc)}") from None
        cls = getattr(mod, "ModelNew", None)
        if cls is None:
            raise Outcome("compile_error", "candidate does not define ModelNew")
        if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
            raise Outcome("compile_error", "ModelNew is not a torch.nn.Module subclass")
        spec_mod = spec.module.__name__
        if issubclass(cls, spec.Model) or any(getattr(c, "__module__", "") == spec_mod for c in cls.__mro__):
            raise Outcome("rejected", "ModelNew inherits from the reference Model")
        try:
            cand_model = specs.build_model(cls, init, opts.seed, dev)
        except Exception as exc:  # noqa: BLE001
            raise Outcome("compile_error", f"ModelNew(*get_init_inputs()) raised: {_exc_summary(exc)}") from None
        v.evidence["parameters"] = specs.copy_parameters(ref_model, cand_model)

        recorder = launches.LaunchRecorder(module_name=mod_name)
        inputs0 = spec.inputs(opts.seed + 1000, dev)

        def run_candidate(inputs: list[Any], label: str) -> Any:
            recorder.reset()
            self.poison(inputs)
            try:
                with launches.recording(recorder):
                    out = self._call(cand_model, inputs)
            except Exception as exc:  # noqa: BLE001
                status = "compile_error" if _is_compile_error(exc) else "runtime_error"
                raise Outcome(status, f"candidate forward raised ({label}): {_exc_summary(exc)}") from None
            # After every candidate call, before anything of ours runs again (the reference
            # included): flags, hooks, modes, timers and threads must be as they were.
            self._check_state(before)
            if recorder.total_own() == 0:
                foreign = f"; other kernels launched: {sorted(recorder.foreign)}" if recorder.foreign else ""
                raise Outcome("rejected", f"no Triton kernel defined by the candidate launched ({label}){foreign}")
            return out

        first_in = compare.clone_tree(inputs0)
        first_out = run_candidate(first_in, "first call")
        kernel_launches = {k: s.launches for k, s in recorder.own.items()}
        kernel_meta = {k: (s.registers, s.shared_bytes, s.spills) for k, s in recorder.own.items()}

        # ---- run: correctness --------------------------------------------------------------
        lap("compile")
        phase("run")
        trial_sets: list[tuple[str, list[Any]]] = [("trial 0", inputs0)]
        for i in range(1, max(1, opts.correctness_trials)):
            trial_sets.append((f"trial {i}", spec.inputs(opts.seed + 1000 + i, dev)))
        for j, extra in enumerate(spec.extra_inputs(opts.seed + 5000, dev)):
            trial_sets.append((f"extra shape set {j}", extra))

        corr = Correctness(trials=0)
        worst_abs = worst_rel = 0.0
        persistent = first_in  # trial 1 reuses trial 0's buffers (x.copy_(new))
        ref_out0: Any = None
        out_shapes: list[Any] = []
        for idx, (label, inputs) in enumerate(trial_sets):
            if idx == 0:
                cand_in, out = first_in, first_out
            elif idx == 1 and _same_shapes(persistent, inputs):
                for dst, src in zip(compare.leaves(persistent), compare.leaves(inputs), strict=False):
                    if isinstance(dst, torch.Tensor):
                        dst.copy_(src)
                cand_in = persistent
                label += " (same buffers as trial 0, new values)"
                out = run_candidate(cand_in, label)
            else:
                cand_in = compare.clone_tree(inputs)
                out = run_candidate(cand_in, label)
            self._check_state(before)
            mutated = compare.inputs_unchanged(inputs, cand_in)
            if mutated:
                raise Outcome("incorrect", f"{mutated} ({label})")
            ref_in = compare.clone_tree(inputs)
            ref = self._call(ref_model, ref_in)
            set_precision_flags()
            ref_aliases = compare.aliases_any(ref, ref_in)
            if len(self._output_sizes) < 64:
                self._output_sizes |= {t.numel() * t.element_size() for t in compare.leaves(ref)
                                       if isinstance(t, torch.Tensor)}
            bad = compare.check_structure(out, ref, cand_in, strict_strides=opts.strict_strides,
                                          allow_input_alias=ref_aliases)
            if bad:
                raise Outcome("incorrect", f"{bad} ({label})")
            if not opts.strict_strides:
                loose = compare.check_structure(out, ref, cand_in, strict_strides=True)
                if loose and loose not in v.warnings:
                    v.warnings.append(loose)
            if isinstance(ref, torch.Tensor) and not ref.is_contiguous() and out.stride() != ref.stride():
                v.warnings.append("reference output is non-contiguous; candidate returned a contiguous tensor")
            cmp = compare.compare_values(out, ref, spec.tolerance)
            corr.atol = cmp.details.get("atol", corr.atol)
            corr.rtol = cmp.details.get("rtol", corr.rtol)
            corr.details.append({"set": label, "ok": cmp.ok, "max_abs_error": cmp.max_abs,
                                 "max_rel_error": cmp.max_rel})
            corr.trials += 1
            worst_abs, worst_rel = max(worst_abs, cmp.max_abs), max(worst_rel, cmp.max_rel)
            corr.max_abs_error, corr.max_rel_error = worst_abs, worst_rel
            v.correctness = corr
            if not cmp.ok:
                raise Outcome("incorrect", f"{cmp.reason} ({label})")
            if idx == 0:
                ref_out0 = ref
                out_shapes = [tuple(t.shape) for t in compare.leaves(ref) if isinstance(t, torch.Tensor)]
                self._crc_and_determinism(run_candidate, inputs, out, ref, spec, v)
                self._error_budget(spec, ref_model, f"seed {opts.seed + 1000}", inputs, out, ref, opts, v)
            elif label.startswith("extra shape set 0"):
                self._error_budget(spec, ref_model, f"extra set 0 seed {opts.seed + 5000}", inputs, out, ref, opts, v)
        v.evidence["kernel_launches"] = kernel_launches
        v.evidence["correctness_sets"] = len(trial_sets)

        # ---- the output must depend on the candidate's kernels ---------------------------
        if opts.check_kernel_dependency:
            self._kernel_dependency(cand_model, recorder, inputs0, ref_out0, spec, v)
        self._check_state(before)

        lap("correctness_and_integrity")
        # ---- timing and diagnosis ---------------------------------------------------------
        # Minimum traffic of any implementation: read inputs and weights once, write outputs once.
        weights = list(ref_model.parameters()) + list(ref_model.buffers())
        bytes_moved = (diagnosis.tensor_bytes(inputs0) + diagnosis.tensor_bytes(weights)
                       + diagnosis.tensor_bytes(ref_out0))
        fkey = (spec.sha, str([tuple(t.shape) for t in compare.leaves(inputs0) if isinstance(t, torch.Tensor)]))
        if fkey not in self.flops_cache:
            self.flops_cache[fkey] = diagnosis.count_flops(lambda: self._call(ref_model, compare.clone_tree(inputs0)))
            set_precision_flags()
        flops = self.flops_cache[fkey]
        diag = Diagnosis(bytes_moved=float(bytes_moved), flops=flops)
        diag.kernels = [KernelInfo(name=k, launches=n, registers=kernel_meta[k][0], shared_bytes=kernel_meta[k][1],
                                   spills=kernel_meta[k][2]) for k, n in kernel_launches.items()]
        v.evidence["output_shapes"] = out_shapes
        lap("flops")
        if opts.profile_library_time:
            probe_in = compare.clone_tree(inputs0)  # cloned outside the profiled region
            frac, per_kernel, ops = diagnosis.library_time_fraction(
                lambda: self._call(cand_model, probe_in), dev.type, set(kernel_launches))
            diag.library_time_fraction = frac
            # Torch ops the candidate calls per forward (fallback nodes, decoys): for the search.
            v.evidence["library_ops"] = ops
            for ki in diag.kernels:
                ki.time_ms = sum(t for name, t in per_kernel.items() if name.startswith(ki.name))
            if frac > 0.5:
                v.warnings.append(f"{frac:.0%} of the candidate's time is spent in torch library calls")
            self._check_state(before)
        lap("library_profile")
        if opts.time_candidates:
            self._time(spec, ref_model, cand_model, opts, v)
            self._check_state(before)
        lap("timing")
        median = v.candidate_timing.median_ms if v.candidate_timing else 0.0
        cls_ = diagnosis.classify(bytes_moved=bytes_moved, flops=flops, median_ms=median, device_type=dev.type,
                                  device_name=self.fingerprint.get("device_name", ""),
                                  uses_tensor_cores=any(t.dtype in (torch.float16, torch.bfloat16)
                                                        for t in compare.leaves(inputs0)
                                                        if isinstance(t, torch.Tensor)))
        for k, val in cls_.items():
            if k == "notes":
                diag.notes.extend(val)
            else:
                setattr(diag, k, val)
        v.diagnosis = diag
        if diag.roofline_fraction > 1.05:
            v.warnings.append(f"timing implies {diag.roofline_fraction:.2f}x the device roofline: flagged for audit")
        v.status = "correct"
        v.reason = (f"matches the reference on {corr.trials} input sets "
                    f"(max abs error {corr.max_abs_error:.3g}, atol={corr.atol:g}, rtol={corr.rtol:g})")

    # -- individual defenses ---------------------------------------------------------------
    def _check_state(self, before: GlobalState) -> None:
        problems = state_violations(before, snapshot(), count_os_threads=self.device.type == "cpu")
        if problems:
            set_precision_flags()
            raise Outcome("rejected", "candidate changed process state: " + "; ".join(problems))

    def _crc_and_determinism(self, run_candidate: Callable[[list[Any], str], Any], inputs: list[Any],
                             out1: Any, ref: Any, spec: specs.LoadedSpec, v: Verdict) -> None:
        """Candidate -> reference -> candidate: the second call runs after the reference's
        output memory was freed, on fresh clones; it must still be right, and agree with the
        first call (bitwise, or within the spec tolerance for atomics-style nondeterminism)."""
        again_in = compare.clone_tree(inputs)
        out2 = run_candidate(again_in, "repeat after the reference ran")
        for a, b in zip(compare.leaves(out1), compare.leaves(out2), strict=False):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.numel() and compare.overlaps(a, b):
                raise Outcome("rejected", "returned the same output memory on two calls (a cached or persistent "
                                          "result): each call must return new memory")
        bad = compare.check_structure(out2, ref, again_in, strict_strides=False)
        if bad:
            raise Outcome("incorrect", f"{bad} (repeat after the reference ran)")
        cmp = compare.compare_values(out2, ref, spec.tolerance)
        if not cmp.ok:
            raise Outcome("incorrect", f"{cmp.reason} (repeat after the reference ran: stale memory or caching?)")
        if compare.bitwise_equal(out1, out2):
            v.evidence["deterministic"] = "bitwise"
        else:
            v.evidence["deterministic"] = "within tolerance"
            v.warnings.append("two runs on identical inputs differ in the last bits (nondeterministic kernel)")

    def _error_budget(self, spec: specs.LoadedSpec, ref_model: torch.nn.Module, key: str, inputs: list[Any],
                      out: Any, ref: Any, opts: JobOptions, v: Verdict) -> None:
        """Candidate error vs a float64 reference must stay within a small multiple of eager
        PyTorch's own error (plus a few-ulp floor): catches precision downgrades that a
        loose absolute tolerance would let through."""
        try:
            r64 = self.ref64(spec, ref_model, key, inputs)
        except Exception as exc:  # noqa: BLE001 - a spec op without float64 support
            v.evidence.setdefault("error_budget", f"skipped: float64 reference failed ({type(exc).__name__})")
            return
        eager_err, scale = compare.max_error(ref, r64)
        cand_err, _ = compare.max_error(out, r64)
        dtypes = [t.dtype for t in compare.leaves(ref) if isinstance(t, torch.Tensor) and t.is_floating_point()]
        if not dtypes:
            return
        eps = max(compare.eps_of(d) for d in dtypes)
        floor = compare.ULP_FLOOR * eps * max(scale, 1.0)
        budget = max(opts.error_budget_factor * eager_err, floor)
        v.evidence.setdefault("error_budget", {})
        if isinstance(v.evidence["error_budget"], dict):
            v.evidence["error_budget"][key] = {"candidate_error": cand_err, "eager_error": eager_err,
                                               "budget": budget}
        if cand_err > budget:
            raise Outcome("incorrect", f"error vs float64 reference {cand_err:.3g} exceeds the budget {budget:.3g} "
                                       f"({opts.error_budget_factor:g}x eager PyTorch's own error {eager_err:.3g}); "
                                       "precision downgrade?")

    def _kernel_dependency(self, cand_model: torch.nn.Module, recorder: launches.LaunchRecorder,
                           inputs0: list[Any], ref0: Any, spec: specs.LoadedSpec, v: Verdict) -> None:
        """Re-run with every candidate launch replaced by a NaN-fill of the tensors it was
        given (inputs and parameters excepted). A result that is still correct was not
        computed by the candidate's kernels (decoy kernel + library fallback)."""
        probe_in = compare.clone_tree(inputs0)
        protected = [compare.storage_span(t) for t in compare.leaves(probe_in) if isinstance(t, torch.Tensor)]
        protected += [compare.storage_span(t) for t in list(cand_model.parameters()) + list(cand_model.buffers())]
        probe = launches.LaunchRecorder(module_name=recorder.module_name, suppress=True, protected=protected)
        self.poison(probe_in)
        try:
            with launches.recording(probe):
                out = self._call(cand_model, probe_in)
        except Exception:  # noqa: BLE001 - failing without its kernels means it needs them
            v.evidence["kernel_dependency"] = "output needs the kernels (raises without them)"
            return
        structure_ok = not compare.check_structure(out, ref0, probe_in, strict_strides=False)
        if structure_ok and compare.compare_values(out, ref0, spec.tolerance).ok:
            raise Outcome("rejected", "the output does not depend on the candidate's Triton kernels: with every "
                                      "launch suppressed it is still correct (work done by library calls?)")
        v.evidence["kernel_dependency"] = "output changes when the kernels are suppressed"

    def _compiled_baseline(self, spec: specs.LoadedSpec, ref_model: torch.nn.Module, inputs: list[Any],
                           v: Verdict) -> Callable[..., Any] | None:
        """torch.compile of the reference (GPU only). Dynamo's code cache and the on-disk
        Inductor/Triton caches make later jobs of the same spec cheap; failures only note."""
        if self.device.type != "cuda":
            v.evidence["compile_baseline"] = "skipped: CPU (the interpreter timing says nothing anyway)"
            return None
        try:
            compiled = torch.compile(ref_model)
            with torch.no_grad():
                check = compiled(*compare.clone_tree(inputs))
                ref = ref_model(*compare.clone_tree(inputs))
            set_precision_flags()
            if not compare.compare_values(check, ref, spec.tolerance).ok:
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

    def _time(self, spec: specs.LoadedSpec, ref_model: torch.nn.Module, cand_model: torch.nn.Module,
              opts: JobOptions, v: Verdict) -> None:
        dev = self.device
        seed = opts.seed if opts.seed is not None else 0
        sets = [spec.inputs(seed + 9000 + i, dev) for i in range(max(1, opts.timing_input_sets))]
        policy = timing.TimingPolicy(min_trials=opts.min_timing_trials, max_trials=opts.max_timing_trials,
                                     ci_target=opts.timing_ci_target, budget_s=opts.timing_budget_s)
        timer = timing.Timer(dev)

        def base(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return ref_model(*inputs)

        def cand(inputs: list[Any]) -> Any:
            with torch.no_grad():
                return cand_model(*inputs)

        contestants: list[Callable[[list[Any]], Any]] = [base, cand]
        compiled = self._compiled_baseline(spec, ref_model, sets[0], v) if opts.compile_baseline else None
        if compiled is not None:

            def comp(inputs: list[Any]) -> Any:
                with torch.no_grad():
                    return compiled(*inputs)

            contestants.append(comp)
        sources = [compare.clone_tree(s) for s in sets]

        def refresh(idx: int, k: int) -> None:
            # Same buffers, new values every round (the source values scaled by a round-unique
            # factor): a cache keyed on pointers or on input values never hits while timed.
            scale = 1.0 + (k + 1) * 2.0**-12
            with torch.no_grad():
                for dst, src in zip(compare.leaves(sets[idx]), compare.leaves(sources[idx]), strict=False):
                    if isinstance(dst, torch.Tensor) and dst.is_floating_point():
                        dst.copy_(src).mul_(scale)

        samples = timing.interleaved_many(contestants, sets, timer, policy, refresh=refresh)
        v.baseline_timing = Timing(**timing.summarize(samples[0]))
        v.candidate_timing = Timing(**timing.summarize(samples[1]))
        if v.candidate_timing.median_ms > 0:
            v.speedup = v.baseline_timing.median_ms / v.candidate_timing.median_ms
        if compiled is not None:
            v.compile_baseline_timing = Timing(**timing.summarize(samples[2]))
            if v.candidate_timing.median_ms > 0:
                v.speedup_vs_compile = v.compile_baseline_timing.median_ms / v.candidate_timing.median_ms
        v.evidence["timing"] = {"input_sets": len(sets), "fresh_values_each_round": True,
                                "l2_flush": dev.type == "cuda",
                                "clock": "cuda events + device synchronize" if dev.type == "cuda"
                                else "time.perf_counter"}


def _same_shapes(a: list[Any], b: list[Any]) -> bool:
    la, lb = compare.leaves(a), compare.leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb, strict=False):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor) and (x.shape != y.shape or x.dtype != y.dtype):
            return False
    return True
