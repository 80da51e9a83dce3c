"""The evaluator's entry point: ``Judge`` keeps warm sandboxed workers and returns verdicts.

    with Judge(EvalOptions(device="auto")) as judge:
        check = judge.validate_spec(spec_source, "relu_scale_add")
        verdict = judge.evaluate(spec_source, candidate_source, candidate_id="c1")
        verdicts = judge.evaluate_many([(spec_source, source_a, "a"), (spec_source, source_b, "b")])

Blocking and thread-safe: up to ``parallel_workers`` evaluations run at once, each in its
own worker (``worker_pool.py``); the workers share the device under a reader/writer lock so that
timing always has it alone (``device_lock.py``). Candidate faults are verdicts, never
exceptions; only misuse raises (``InvalidArgumentError``) and an unusable spec passed to
``evaluate`` raises ``InvalidSpecError``.

Seeds: with ``EvalOptions.seed`` None the seed of an evaluation is derived from a secret
salt drawn once per Judge (never written anywhere; a worker sees only the derived seed),
the spec and a rotation counter that moves on every ``cache.seed_rotation_jobs`` evaluations of
the spec in one worker, so consecutive candidates of a spec share input sets and the
worker reuses their reference outputs (``reference_cache.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kernelevolve import pyast
from kernelevolve.errors import DeviceUnavailable, InvalidArgumentError, InvalidSpecError
from kernelevolve.ports.verdict import TIERS, SpecCheck, Status, Verdict
from kernelevolve.precision import Precision, check_name
from kernelevolve.spec import hanging_import

from .. import backends, device_lock, resource_limits
from ..phase_limits import JobLimits, LimitPolicy, ReferenceCost
from . import gpus, static_policy
from .memory_admission import DeviceMemory, Footprint, MemoryAdmission, Ticket, TorchDeviceMemory, gib, requested_bytes
from .options import EvalOptions, resolve_device
from .worker_pool import Slot, WorkerPool, WorkerProcess, _Reply

log = logging.getLogger(__name__)
_SCREEN_KEY = ":screen"  # suffix of a spec's footprint key for its screens


@dataclass
class EvalJob:
    """One ``evaluate`` call for ``Judge.evaluate_many``."""

    spec_source: str
    candidate_source: str
    candidate_id: str = ""
    fresh_worker: bool = False
    tier: str | None = None  # None: EvalOptions.tier

    @classmethod
    def of(cls, job: EvalJob | Sequence[Any]) -> EvalJob:
        if isinstance(job, EvalJob):
            return job
        if isinstance(job, (tuple, list)) and 2 <= len(job) <= 5:
            return cls(*job)
        raise InvalidArgumentError("evaluate_many takes EvalJob or (spec_source, candidate_source[, id[, fresh]])")


class Judge:
    """Evaluates candidates against specs in sandboxed, reusable worker processes."""

    def __init__(self, opts: EvalOptions | None = None, device_memory: DeviceMemory | None = None) -> None:
        """``device_memory``: the port that reads a GPU's free memory for the memory
        admission (``memory_admission.py``); default ``TorchDeviceMemory`` on CUDA with
        ``pool.memory_admission``, none on the CPU (tests pass ``FixedDeviceMemory``)."""
        self.opts = dataclasses.replace(opts) if opts is not None else EvalOptions()  # ours to adjust
        self.opts.validate()
        self.device = resolve_device(self.opts.device)  # a device backend's name
        if self.backend.accelerated and self.opts.sandbox.cuda_visible_devices is None:
            pinned = (self.backend.visible_devices(os.environ) or "0").split(",")[0] or "0"
            self.opts.sandbox = dataclasses.replace(self.opts.sandbox, cuda_visible_devices=pinned)
        self._own_root = self.opts.scratch_dir is None
        root = os.fspath(self.opts.scratch_dir) if self.opts.scratch_dir else tempfile.mkdtemp(prefix="ke-eval-")
        os.makedirs(root, exist_ok=True)
        self.root = os.path.abspath(root)
        # The device lock of this Judge's workers lives in its root (device_lock.py).
        self.lock_dir = device_lock.create_files(self.root)
        # With several GPUs, one lock per GPU in its own folder (timing needs only its device).
        self.pins: list[str | None] = [None] * self.opts.parallel_workers
        if self.backend.accelerated and self.opts.gpus:
            self.pins = list(gpus.pin_workers(list(self.opts.gpus), self.opts.parallel_workers))
            self.opts.parallel_workers = len(self.pins)
        # Secret of this Judge alone: seeds are derived from it, and it never leaves this process.
        self._salt = secrets.token_bytes(32)
        self._state = threading.Lock()  # guards the rotation counters
        self._spec_jobs: dict[tuple[str, int], int] = {}
        o = self.opts
        n = o.parallel_workers
        lock_wait = o.pool.lock_wait_timeout_s
        if lock_wait is None:
            longest = LimitPolicy.from_job_options(self._job_options()).upper_bounds()
            lock_wait = (sum(longest) + o.sandbox.startup_timeout_s) * max(1, n)
        p = o.pool
        early = p.spare_worker and (p.spare_from_start if p.spare_from_start is not None else self.backend.accelerated)
        self._pool = WorkerPool([Slot(i, functools.partial(self._spawn, self.pins[i]), o, lock_wait,
                                       spare_early=early) for i in range(n)])
        # Memory admission per GPU, and each spec's measured footprint (by spec digest).
        self._footprints: dict[str, Footprint] = {}
        # Each spec's reference cost (by spec digest): measured by its first job, before
        # that job's candidate was loaded; the phase limits of its later jobs grow with it.
        self._costs: dict[str, ReferenceCost] = {}
        self._admission: dict[str | None, MemoryAdmission] = {}
        if device_memory is None and self.backend.accelerated and o.pool.memory_admission:
            device_memory = TorchDeviceMemory(backend=self.backend)
        if device_memory is not None:
            for gpu in dict.fromkeys(self._gpu_of(i) for i in range(n)):
                self._admission[gpu] = MemoryAdmission(device_memory, gpu, o.pool.memory_margin)
        self.fingerprint: dict[str, str] = {}
        # What the last worker achieved: network/filesystem isolation, rlimits, launch hooks.
        self.sandbox_info: dict[str, Any] = {}

    @property
    def backend(self) -> backends.DeviceBackend:
        """The device backend of ``device`` (one instance per process, from the registry)."""
        return backends.get_backend(self.device)

    def _spawn(self, gpu: str | None = None) -> WorkerProcess:
        if gpu is None:
            return WorkerProcess(self.root, self.device, self.opts, lock_dir=self.lock_dir)
        lock_dir = device_lock.create_files(os.path.join(self.root, f"gpu-{gpu}"))
        sandbox = dataclasses.replace(self.opts.sandbox, cuda_visible_devices=gpu)
        return WorkerProcess(self.root, self.device, dataclasses.replace(self.opts, sandbox=sandbox),
                             lock_dir=lock_dir)

    def _gpu_of(self, slot_index: int) -> str | None:
        return self.pins[slot_index] if self.pins[slot_index] is not None else self.opts.sandbox.cuda_visible_devices

    def admission(self, slot_index: int = 0) -> MemoryAdmission | None:
        """The memory admission of a slot's GPU (None: admission off)."""
        return self._admission.get(self._gpu_of(slot_index))

    def footprint(self, spec_source: str, compile_baseline: bool = False) -> Footprint | None:
        """The spec's footprint as measured by an earlier evaluation on this Judge."""
        key = self._footprint_key(hashlib.sha256(spec_source.encode()).hexdigest(), compile_baseline)
        with self._state:
            return self._footprints.get(key)

    def reference_cost(self, spec_source: str) -> ReferenceCost | None:
        """The spec's reference cost as measured by an earlier evaluation on this Judge."""
        with self._state:
            return self._costs.get(hashlib.sha256(spec_source.encode()).hexdigest())

    def _job_limits(self, sha: str, options: dict[str, Any]) -> JobLimits:
        """The phase limits of a job of spec ``sha`` (``phase_limits``); sets in ``options``
        the stored cost the worker's own CPU-time backstop follows, or asks the worker to
        measure it first."""
        policy = LimitPolicy.from_job_options(options)
        with self._state:
            cost = self._costs.get(sha)
        limits = JobLimits(policy, cost, measure=cost is None,
                           cost_source="measured by an earlier job of the spec, before its candidate was loaded")
        options["reference_cost"] = cost.to_dict() if cost is not None else None
        options["measure_reference_cost"] = limits.measure
        return limits

    def _learn_cost(self, sha: str, limits: JobLimits) -> None:
        """Keep a cost a job measured (the smaller of it and any stored: ``ReferenceCost.merged``)."""
        if limits.measured is None:
            return
        with self._state:
            old = self._costs.get(sha)
            self._costs[sha] = limits.measured if old is None else old.merged(limits.measured)

    def _footprint_key(self, sha: str, compile_baseline: bool) -> str:
        # A job that also compiles the reference has a footprint of its own (Inductor's
        # buffers and the compiled baseline's timing beside the eager one).
        return sha + (":compile" if compile_baseline or self.opts.timing.compile_baseline else "")

    def _send(self, slot: Slot, msg: dict[str, Any], sha: str, limits: JobLimits,
              alone: bool = False) -> tuple[_Reply, WorkerProcess, Ticket | None]:
        """Send a job once the slot's GPU has memory for it (admission waits happen before
        the job reaches the worker: never on its phase clocks)."""
        adm = self.admission(slot.index)
        ticket: Ticket | None = None
        if adm is None:
            reply, worker = slot.send(msg, limits)
        else:
            fp = self._admission_footprint(sha)
            with adm.admit(fp.need_bytes if fp is not None else None, alone=alone) as ticket:
                reply, worker = slot.send(msg, limits)
        if reply.kind == "unavailable":
            raise DeviceUnavailable(reply.reason)
        return reply, worker, ticket

    def _admission_footprint(self, key: str) -> Footprint | None:
        """The footprint a job of ``key`` is admitted with: its own when measured; a
        screen's (key ``...:screen``, one input set, no audit) falls back to the spec's full
        footprint, an upper bound, until a screen has measured its own."""
        with self._state:
            fp = self._footprints.get(key)
            if fp is None and key.endswith(_SCREEN_KEY):
                fp = self._footprints.get(key.removesuffix(_SCREEN_KEY))
            return fp

    def _estimate_footprint(self, spec_source: str, slot: Slot, info: Any) -> None:
        """A validated spec's footprint, predicted from the sizes its validation measured,
        until a job of it measures the real one: its first job need not run alone."""
        adm = self.admission(slot.index)
        if adm is None or not isinstance(info, dict):
            return
        fp = Footprint.from_validation(info.get("memory"), adm.device_total())
        if fp is None:
            return
        key = self._footprint_key(hashlib.sha256(spec_source.encode()).hexdigest(), False)
        with self._state:
            self._footprints.setdefault(key, fp)

    def _learn(self, sha: str, payload: dict[str, Any]) -> Footprint | None:
        """Keep the footprint a job measured: the first measurement of a spec, then the
        larger of it and any correct job's (out-of-memory jobs teach nothing)."""
        ev = payload.get("evidence", {}) if isinstance(payload.get("evidence"), dict) else {}
        fp = None if ev.get("out_of_memory") else Footprint.from_report(ev.get("memory"))
        with self._state:
            old = self._footprints.get(sha)
            if fp is not None and (old is None or payload.get("status") == "correct"):
                self._footprints[sha] = fp if old is None else old.merged(fp)
            return self._footprints.get(sha)

    @property
    def workers_started(self) -> int:
        return sum(s.started for s in self._pool.slots)

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, abort: bool = False) -> None:
        """Waits for running evaluations, then stops every worker. ``abort``: kill the workers
        of running evaluations first (they end as crashed, for callers that no longer wait)."""
        self._pool.close(abort)
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def warm_up(self) -> None:
        """Start every worker now and wait until they are ready (torch/triton imported)."""
        with contextlib.ExitStack() as stack:
            slots = [stack.enter_context(self._pool.lease()) for _ in self._pool.slots]
            for slot in slots:
                slot.ensure()  # all start at once
            for slot in slots:
                if not slot.wait_ready():
                    self._note_worker(slot)

    def _note_worker(self, slot: Slot) -> None:
        if slot.fingerprint:
            self.fingerprint = dict(slot.fingerprint)
            self.sandbox_info = dict(slot.sandbox_info)

    def _job_options(self) -> dict[str, Any]:
        """The options of a job as the worker reads them (flat: ``worker.evaluation.JobOptions``)."""
        o, t, c = self.opts, self.opts.timing, self.opts.cache
        cuda = self.backend.accelerated
        return {
            "device": self.device, "correctness_trials": o.correctness_trials,
            "compile_timeout_s": o.compile_timeout_s, "run_timeout_s": o.run_timeout_s,
            "run_timeout_max_s": o.run_timeout_max_s, "reference_cost_factor": o.reference_cost_factor,
            "spec_import_timeout_s": o.spec_import_timeout_s,
            "time_candidates": o.time_candidates, "seed": o.seed,
            "reference_cache_bytes": c.limit_bytes,
            # per worker, of the free memory of its own device
            "reference_cache_fraction": c.fraction / max(self.pins.count(p) for p in self.pins),
            "min_timing_trials": t.min_trials or (10 if cuda else 3),
            "max_timing_trials": t.max_trials or (200 if cuda else 10),
            "timing_ci_target": t.ci_target, "timing_budget_s": t.budget_s, "timing_input_sets": t.input_sets,
            "compile_baseline": t.compile_baseline, "error_budget_factor": o.error_budget_factor,
            "check_kernel_dependency": o.check_kernel_dependency, "audit_economy": o.audit_economy,
            "profile_library_time": o.profile_library_time,
            "strict_strides": o.strict_strides, "precompile": o.precompile, "precision": o.precision, "tier": o.tier,
        }

    def _seed_options(self, sha: str, slot: Slot, advance: bool = True) -> dict[str, Any]:
        """Seed fields of a job of spec ``sha`` in ``slot``. ``advance`` False (a screen):
        the job does not move the rotation on, so the screens of a session keep reading the
        inputs and references its worker holds; the full protocol's per-job secret sets
        (trial 1, extra shapes, timing) are what rotation protects, and a screen has none."""
        if self.opts.seed is not None:
            return {"seed": self.opts.seed}
        if self.opts.cache.limit_bytes == 0:
            return {"seed": None}
        with self._state:
            n = self._spec_jobs.get((sha, slot.index), 0)
            self._spec_jobs[(sha, slot.index)] = n + 1 if advance else n
        rotation = n // self.opts.cache.seed_rotation_jobs
        digest = hmac.new(self._salt, f"seed:{sha}:{slot.index}:{rotation}".encode(), hashlib.sha256).digest()
        seed = int.from_bytes(digest[:8], "big") % (1 << 30)
        # A handle that tells verdicts with equal seeds apart without revealing the seed.
        seed_id = hmac.new(self._salt, b"seed-id:" + digest, hashlib.sha256).hexdigest()[:12]
        # The parent's log only (to reproduce a verdict); never in a verdict while it may be in use.
        log.debug("derived seed %d (seed_id %s) for spec %s, slot %d, rotation %d", seed, seed_id, sha[:12],
                  slot.index, rotation)
        return {"seed": seed, "seed_shared": True, "seed_id": seed_id}

    # -- public API ----------------------------------------------------------------------------
    def validate_spec(self, spec_source: str, spec_name: str) -> SpecCheck:
        if not isinstance(spec_source, str) or not isinstance(spec_name, str):
            raise InvalidArgumentError("spec_source and spec_name must be strings")
        pre = _spec_precheck(spec_source)
        if pre:
            return SpecCheck(ok=False, reason=pre)
        with self._pool.lease() as slot:
            options = self._job_options()
            msg = {"op": "validate_spec", "job_id": uuid.uuid4().hex, "spec_source": spec_source,
                   "spec_name": spec_name, "options": options}
            # Validation runs the reference a few times and never its float64 run: fixed limits.
            limits = JobLimits(LimitPolicy.from_job_options(options), importing=True)
            reply, worker, _ = self._send(slot, msg, hashlib.sha256(spec_source.encode()).hexdigest(), limits)
            self._note_worker(slot)
            if reply.kind == "timeout" and limits.phase in ("", "import"):
                slot.replace()
                return SpecCheck(ok=False, reason=hanging_import(limits.seconds("import")))
            if reply.kind != "result":
                slot.replace()
                what = "hung" if reply.kind == "timeout" else "crashed"
                # A worker that died of an allocation failure (or was SIGKILLed, the
                # out-of-memory killer's signal) hit our limits, not a spec fault.
                oom = reply.kind == "crashed" and resource_limits.looks_like_memory_failure(reply.reason)
                reason = f"reference {what} when run: {reply.reason}"
                if oom:
                    reason = resource_limits.describe("the reference (its worker died)", reply.reason,
                                                      self.opts.sandbox.memory_limit_bytes,
                                                      "worker address space (evaluator.sandbox.memory_limit_bytes)",
                                                      "raise the limit, give the machine more memory or use "
                                                      "smaller inputs")
                return SpecCheck(ok=False, reason=reason, resource_limited=oom)
            p = reply.payload
            if not p.get("ok"):
                slot.replace()  # a spec that raised may have left state behind
            else:
                self._estimate_footprint(spec_source, slot, p.get("info", {}))
            return SpecCheck(ok=bool(p.get("ok")), reason=str(p.get("reason", "")),
                             warnings=list(p.get("warnings", [])), info=dict(p.get("info", {})),
                             resource_limited=bool(p.get("resource_limited")),
                             nothing_to_compute=bool(p.get("nothing_to_compute")))

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, compile_baseline: bool = False,
                 tier: str | None = None, precision: str | None = None) -> Verdict:
        """Judge one candidate. ``fresh_worker=True`` runs it in a newly started worker (use it
        to re-time finalists: a lucky timing in a warm worker should not make an elite).
        ``compile_baseline=True`` also times torch.compile of the reference in the same worker
        for this job, whatever ``TimingOptions.compile_baseline`` says (a session's
        ``--baseline compile``). ``precision``: the contract of this job (a session's
        ``--precision``; None: ``EvalOptions.precision``); every verdict names it.
        ``tier``: "screen" or "full" (None: ``EvalOptions.tier``);
        the static policy judges every tier."""
        if not isinstance(spec_source, str) or not isinstance(candidate_source, str):
            raise InvalidArgumentError("spec_source and candidate_source must be strings")
        tier = self.opts.tier if tier is None else tier
        if tier not in TIERS:
            raise InvalidArgumentError(f"tier must be one of {', '.join(TIERS)}, not {tier!r}")
        if self._pool.closed:
            raise InvalidArgumentError("Judge is closed")
        pre = _spec_precheck(spec_source)
        if pre:
            raise InvalidSpecError(pre)
        contract = check_name(precision or self.opts.precision)
        t0 = time.monotonic()
        report = static_policy.check_candidate(candidate_source)
        if not self.opts.enforce_static_policy and not report.syntax_error:
            report = static_policy.StaticReport(ok=True)
        if not report.ok:
            status: Status = "compile_error" if report.syntax_error else "rejected"
            v = Verdict(status=status, reason=report.reason, candidate_id=candidate_id, device=self.device,
                        interpreted=self.device == "cpu", fingerprint=dict(self.fingerprint),
                        tier=tier)  # type: ignore[arg-type]
            v.precision = Precision(name=contract)
            v.evidence["static_findings"] = [f.render() for f in report.findings]
            v.evidence["wall_s"] = round(time.monotonic() - t0, 3)
            return v
        affinity = hashlib.sha256(spec_source.encode()).hexdigest()  # the worker whose cache has the spec
        with self._pool.lease(affinity) as slot:
            seed_opts = self._seed_options(affinity, slot, advance=tier == "full")
            options = {**self._job_options(), **seed_opts, **({"compile_baseline": True} if compile_baseline else {}),
                       "precision": contract, "tier": tier}
            limits = self._job_limits(affinity, options)
            msg = {"op": "evaluate", "job_id": uuid.uuid4().hex, "spec_source": spec_source, "spec_name": "",
                   "candidate_source": candidate_source, "candidate_id": candidate_id, "options": options}
            if fresh_worker and slot.worker is not None and slot.worker.jobs > 0:
                slot.replace()
            # A screen holds less than a full job (one input set, no audit): its own footprint,
            # so that a full job of the spec is never admitted with a screen's.
            fp_key = self._footprint_key(affinity, compile_baseline) + (_SCREEN_KEY if tier == "screen" else "")
            reply, worker, ticket = self._send(slot, msg, fp_key, limits)
            self._learn_cost(affinity, limits)
            first: dict[str, Any] | None = None
            if ticket is not None and ticket.shared and _out_of_memory(reply):
                # Out of memory while other jobs shared the GPU: not the candidate's verdict.
                # Again alone, in a fresh worker (the old one's allocator is fragmented).
                first = {"reason": str(reply.payload.get("reason", ""))[:300], "admission": ticket.evidence()}
                log.info("candidate %s ran out of memory beside other jobs; re-running it alone", candidate_id)
                slot.replace()
                limits = self._job_limits(affinity, options)  # measured by the first attempt, if it got that far
                reply, worker, ticket = self._send(slot, msg, fp_key, limits, alone=True)
                self._learn_cost(affinity, limits)
            self._note_worker(slot)
            if reply.kind == "result" and "spec_error" in reply.payload:
                slot.replace()
                raise InvalidSpecError(str(reply.payload["spec_error"]))
            if reply.kind == "result":
                try:
                    v = Verdict.from_dict(reply.payload)
                except (TypeError, ValueError) as exc:
                    v = Verdict(status="crashed", reason=f"worker returned an unreadable verdict: {exc}")
            else:
                v = Verdict(status=reply.kind, reason=reply.reason)  # type: ignore[arg-type]
            v.candidate_id = candidate_id
            if v.precision is None or v.precision.name != contract:  # the worker never said (crash, timeout)
                v.precision = Precision(name=contract)
            v.tier = tier  # type: ignore[assignment]
            v.device = self.device
            v.interpreted = self.device == "cpu"
            if not v.fingerprint:
                v.fingerprint = dict(self.fingerprint)
            if v.interpreted and not any("interpreter" in w for w in v.warnings):
                v.warnings.append("CPU run in the Triton interpreter: timings say nothing about GPU speed")
            v.evidence["worker"] = {"pid": worker.proc.pid, "job_index": worker.jobs, "slot": slot.index,
                                   "gpu": self._gpu_of(slot.index)}
            # The limits this job ran under and why (the parent's, whatever the worker said).
            v.evidence["phase_limits"] = limits.evidence()
            if ticket is not None:
                self._note_memory(v, reply, fp_key, ticket, first)
                adm = self.admission(slot.index)
                held = v.evidence["memory"]["job"].get("held_after_job_bytes")
                if adm is not None and isinstance(held, int):
                    adm.note_resident(slot.index, held)
            v.evidence["wall_s"] = round(time.monotonic() - t0, 3)
            if v.status != "correct" and not self._may_reuse(v):
                # The interpreter, an out-of-bounds access or a half-run candidate can leave
                # the process corrupted: a fresh worker costs ~3 s, a poisoned one costs trust.
                slot.replace()
            elif worker.jobs >= self.opts.pool.max_jobs_per_worker:
                slot.replace()
            else:
                slot.affinity = affinity
            return v

    def evaluate_many(self, jobs: Iterable[EvalJob | Sequence[Any]]) -> list[Verdict]:
        """Judge several candidates, up to ``parallel_workers`` at once; verdicts in input
        order. Items: ``EvalJob`` or ``(spec_source, candidate_source[, candidate_id[,
        fresh_worker[, tier]]])``. An exception of one job (misuse, an unusable spec) is raised after
        the others have finished."""
        items = [EvalJob.of(j) for j in jobs]
        width = min(self.opts.parallel_workers, len(items))
        if width <= 1:
            return [self.evaluate(j.spec_source, j.candidate_source, j.candidate_id, j.fresh_worker, tier=j.tier)
                    for j in items]
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="ke-judge") as ex:
            futures = [ex.submit(self.evaluate, j.spec_source, j.candidate_source, j.candidate_id, j.fresh_worker,
                                 tier=j.tier) for j in items]
            for f in futures:
                f.exception()  # wait for all before raising any
            return [f.result() for f in futures]

    def _note_memory(self, v: Verdict, reply: _Reply, sha: str, ticket: Ticket, first: dict[str, Any] | None) -> None:
        """Footprint and admission in the verdict's evidence; an out-of-memory error of a
        job that ran alone becomes what it needs against what the device has."""
        reported = v.evidence.get("memory")
        job: dict[str, Any] = reported if isinstance(reported, dict) else {}
        fp = self._learn(sha, reply.payload) if reply.kind == "result" else None
        mem: dict[str, Any] = {"job": job, "admission": ticket.evidence()}
        if fp is not None:
            mem["footprint"] = fp.to_dict()
        if first is not None:
            mem["first_attempt"] = first
            mem["rerun_alone"] = True
        v.evidence["memory"] = mem
        if v.status == "runtime_error" and v.evidence.get("out_of_memory") and not ticket.shared:
            job_peak = int(job.get("job_peak_bytes", 0) or 0)
            floor = int(job.get("inputs_bytes", 0) or 0) + int(job.get("parameters_bytes", 0) or 0)
            need = max(fp.need_bytes if fp is not None else 0, max(job_peak, floor) + requested_bytes(v.reason))
            total = ticket.total_bytes
            v.reason = (f"out of memory running alone on the device: needs about {gib(need)}, the device has "
                        f"{gib(total)} ({gib(ticket.capacity_bytes)} free with no other evaluation running); "
                        f"{v.reason}")[:1500]

    def _may_reuse(self, v: Verdict) -> bool:
        """Whether a worker that produced a non-correct verdict may serve the next job.

        Never after a timeout/crash (the process is gone) or a runtime rejection (the
        candidate changed process state). After a CUDA runtime error the context may be
        poisoned (sticky errors), so only CPU runtime errors qualify.
        """
        reuse = self.opts.pool.reuse_worker_after_failure
        if reuse is None:
            reuse = self.backend.accelerated
        if not reuse:
            return False
        if v.status in ("incorrect", "compile_error"):
            return True
        return v.status == "runtime_error" and not self.backend.accelerated


def _out_of_memory(reply: _Reply) -> bool:
    ev = reply.payload.get("evidence") if reply.kind == "result" else None
    return isinstance(ev, dict) and bool(ev.get("out_of_memory"))


def _spec_precheck(spec_source: str) -> str:
    """Cheap parent-side check: parses and defines the three names (no code runs)."""
    import ast

    try:
        tree = pyast.parse(spec_source)
    except SyntaxError as exc:
        return f"spec does not parse: line {exc.lineno}: {exc.msg}"
    except ValueError as exc:
        return f"spec does not parse: {exc}"
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in names]
    if missing:
        return f"spec lacks {', '.join(missing)}"
    return ""
