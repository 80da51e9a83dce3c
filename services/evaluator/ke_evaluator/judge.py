"""The evaluator's entry point: ``Judge`` keeps warm sandboxed workers and returns verdicts.

    with Judge(EvalOptions(device="auto")) as judge:
        check = judge.validate_spec(spec_source, "relu_scale_add")
        verdict = judge.evaluate(spec_source, candidate_source, candidate_id="c1")
        verdicts = judge.evaluate_many([(spec_source, source_a, "a"), (spec_source, source_b, "b")])

Blocking and thread-safe: up to ``parallel_workers`` evaluations run at once, each in its
own worker (``pool.py``); the workers share the device under a reader/writer lock so that
timing always has it alone (``devlock.py``). Candidate faults are verdicts, never
exceptions; only misuse raises (``InvalidArgumentError``) and an unusable spec passed to
``evaluate`` raises ``InvalidSpecError``.

Seeds: with ``EvalOptions.seed`` None the seed of an evaluation is derived from a secret
salt drawn once per Judge (never written anywhere; a worker sees only the derived seed),
the spec and a rotation counter that moves on every ``seed_rotation_jobs`` evaluations of
the spec in one worker, so consecutive candidates of a spec share input sets and the
worker reuses their reference outputs (``refcache.py``).
"""

from __future__ import annotations

import contextlib
import dataclasses
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
from dataclasses import asdict, dataclass
from typing import Any

from kernelevolve.errors import InvalidArgumentError, InvalidSpecError
from kernelevolve.ports.verdict import SpecCheck, Status, Verdict

from . import devlock, static_checks
from .pool import Slot, WorkerPool, WorkerProcess

log = logging.getLogger(__name__)


@dataclass
class EvalOptions:
    device: str = "auto"  # "auto" | "cpu" | "cuda"; auto = cuda if torch.cuda.is_available() else cpu
    correctness_trials: int = 5
    compile_timeout_s: float = 120.0  # import + construct + first call (Triton JIT compile)
    run_timeout_s: float = 120.0  # correctness + integrity checks + timing
    time_candidates: bool = True
    scratch_dir: str | os.PathLike[str] | None = None  # root of worker scratch dirs; a temp dir when None
    # Base seed of inputs and weights. None: derived per evaluation from a secret per-Judge
    # salt, shared by ``seed_rotation_jobs`` consecutive evaluations of a spec in a worker
    # (reference cache; not reported) -- or random per evaluation (reported) when the cache
    # is off. An int: that seed for every evaluation (reported; reproducible).
    seed: int | None = None
    seed_rotation_jobs: int = 8
    # Reference cache of each worker (inputs, eager and float64 reference outputs per spec and
    # seed): a byte cap; None = reference_cache_fraction of free device memory split over
    # the workers (CUDA) or 256 MiB (CPU); 0 = off (seeds random per evaluation again).
    reference_cache_bytes: int | None = None
    reference_cache_fraction: float = 0.25
    # Timing: None picks the device default (CPU interpreter 3..10, CUDA 10..200).
    min_timing_trials: int | None = None
    max_timing_trials: int | None = None
    timing_ci_target: float = 0.02  # stop when the median's 95% CI is within +-2%
    timing_budget_s: float = 30.0
    timing_input_sets: int = 3
    error_budget_factor: float = 10.0  # candidate error vs fp64 <= this x eager error (+ ulp floor)
    check_kernel_dependency: bool = True
    profile_library_time: bool = True
    # Output strides must equal the reference's (a contiguous answer to a non-contiguous
    # reference is accepted). False: a stride mismatch is only a warning.
    strict_strides: bool = True
    # GPU only: also time torch.compile of the reference (verdict.compile_baseline_timing).
    compile_baseline: bool = False
    # The AST policy (static_checks). Turning it off leaves only the runtime defenses:
    # meant for testing those layers, never for production.
    enforce_static_policy: bool = True
    # Sandbox.
    startup_timeout_s: float = 180.0
    memory_limit_bytes: int | None = 16 * 2**30  # RLIMIT_AS, CPU only (CUDA maps huge VA ranges)
    file_size_limit_bytes: int = 256 * 2**20
    network_isolation: bool = True
    filesystem_isolation: bool = True  # private mount namespace: all read-only but scratch + Triton cache
    cuda_visible_devices: str | None = None  # pin the worker's GPU; None keeps the parent's value
    # Worker reuse after a non-correct verdict. True keeps the worker after incorrect /
    # compile_error (and CPU runtime_error); False replaces it after any. None (default):
    # True on CUDA, False on CPU. In the interpreter an unmasked out-of-bounds access can
    # corrupt the worker's own heap, so an incorrect answer there may be a symptom. On a GPU
    # the same bug lands in device memory: either a CUDA error (runtime_error, always
    # replaced) or a silent write, which the reference cache's checksums and the integrity
    # snapshot catch for the next job as they do after a correct one. A replacement there
    # costs a new spare's CUDA start-up under the shared device lock and the worker's
    # reference cache (6 of 24 jobs in bench/eval_throughput.py's mix).
    reuse_worker_after_failure: bool | None = None
    max_jobs_per_worker: int = 50
    # Once a worker has been replaced, keep a pre-started spare (never given a job) so the
    # next replacement is instant. Starting a worker (torch import + CUDA init) took ~3 s
    # and was most of the judge's wall time on an H100 when failures were frequent
    # (bench/RESULTS.md). Costs one idle process (and a CUDA context) while it waits.
    spare_worker: bool = True
    # Start the spare with the first worker instead of after the first replacement. None:
    # on CUDA only. An H100 run waited ~10 s for a worker after its first failure, 14% of
    # the run (bench/results/eval_throughput.json); on a small CPU host the idle torch
    # import would compete with the work.
    spare_from_start: bool | None = None
    # Workers judging at once on the device (``evaluate`` from several threads, or
    # ``evaluate_many``). Timing takes the device alone (exclusive lock); everything else
    # overlaps. Each worker has its own spare and reference cache.
    parallel_workers: int = 1
    # Longest wait for the device lock before a job is given up (the wait itself does not
    # count against compile/run timeouts). None: every other worker's limits added up.
    lock_wait_timeout_s: float | None = None


@dataclass
class EvalJob:
    """One ``evaluate`` call for ``Judge.evaluate_many``."""

    spec_source: str
    candidate_source: str
    candidate_id: str = ""
    fresh_worker: bool = False

    @classmethod
    def of(cls, job: EvalJob | Sequence[Any]) -> EvalJob:
        if isinstance(job, EvalJob):
            return job
        if isinstance(job, (tuple, list)) and 2 <= len(job) <= 4:
            return cls(*job)
        raise InvalidArgumentError("evaluate_many takes EvalJob or (spec_source, candidate_source[, id[, fresh]])")


def resolve_device(device: str) -> str:
    if device not in ("auto", "cpu", "cuda"):
        raise InvalidArgumentError(f"EvalOptions.device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "cpu":
        return device
    try:
        import torch

        available = torch.cuda.is_available()
    except ImportError:
        available = False
    if device == "cuda" and not available:
        raise InvalidArgumentError("EvalOptions.device='cuda' but no CUDA device is available")
    return "cuda" if available else "cpu"


class Judge:
    """Evaluates candidates against specs in sandboxed, reusable worker processes."""

    def __init__(self, opts: EvalOptions | None = None) -> None:
        self.opts = dataclasses.replace(opts) if opts is not None else EvalOptions()  # ours to adjust
        self._validate_options(self.opts)
        self.device = resolve_device(self.opts.device)
        if self.device == "cuda" and self.opts.cuda_visible_devices is None:
            self.opts.cuda_visible_devices = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0] or "0"
        self._own_root = self.opts.scratch_dir is None
        root = os.fspath(self.opts.scratch_dir) if self.opts.scratch_dir else tempfile.mkdtemp(prefix="ke-eval-")
        os.makedirs(root, exist_ok=True)
        self.root = os.path.abspath(root)
        # The device lock of this Judge's workers lives in its root (devlock.py).
        self.lock_dir = devlock.create_files(self.root)
        # Secret of this Judge alone: seeds are derived from it, and it never leaves this process.
        self._salt = secrets.token_bytes(32)
        self._state = threading.Lock()  # guards the rotation counters
        self._spec_jobs: dict[tuple[str, int], int] = {}
        o = self.opts
        n = o.parallel_workers
        lock_wait = o.lock_wait_timeout_s
        if lock_wait is None:
            lock_wait = (o.compile_timeout_s + o.run_timeout_s + o.startup_timeout_s) * max(1, n)
        early = o.spare_worker and (o.spare_from_start if o.spare_from_start is not None else self.device == "cuda")
        self._pool = WorkerPool([Slot(i, self._spawn, o, lock_wait, spare_early=early) for i in range(n)])
        self.fingerprint: dict[str, str] = {}
        # What the last worker achieved: network/filesystem isolation, rlimits, launch hooks.
        self.sandbox_info: dict[str, Any] = {}

    @staticmethod
    def _validate_options(o: EvalOptions) -> None:
        if o.correctness_trials < 1:
            raise InvalidArgumentError("correctness_trials must be >= 1")
        if o.compile_timeout_s <= 0 or o.run_timeout_s <= 0:
            raise InvalidArgumentError("timeouts must be positive")
        for name in ("min_timing_trials", "max_timing_trials"):
            val = getattr(o, name)
            if val is not None and val < 1:
                raise InvalidArgumentError(f"{name} must be >= 1")
        if o.parallel_workers < 1:
            raise InvalidArgumentError("parallel_workers must be >= 1")
        if o.seed_rotation_jobs < 1:
            raise InvalidArgumentError("seed_rotation_jobs must be >= 1")
        if o.reference_cache_bytes is not None and o.reference_cache_bytes < 0:
            raise InvalidArgumentError("reference_cache_bytes must be >= 0 (or None)")
        if not 0.0 <= o.reference_cache_fraction <= 1.0:
            raise InvalidArgumentError("reference_cache_fraction must be within [0, 1]")

    def _spawn(self) -> WorkerProcess:
        return WorkerProcess(self.root, self.device, self.opts, lock_dir=self.lock_dir)

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
        o = self.opts
        cuda = self.device == "cuda"
        d = asdict(o)
        d["device"] = self.device
        d["min_timing_trials"] = o.min_timing_trials or (10 if cuda else 3)
        d["max_timing_trials"] = o.max_timing_trials or (200 if cuda else 10)
        d["reference_cache_fraction"] = o.reference_cache_fraction / o.parallel_workers  # per worker
        return d

    def _seed_options(self, sha: str, slot: Slot) -> dict[str, Any]:
        """Seed fields of a job of spec ``sha`` in ``slot``."""
        if self.opts.seed is not None:
            return {"seed": self.opts.seed}
        if self.opts.reference_cache_bytes == 0:
            return {"seed": None}
        with self._state:
            n = self._spec_jobs.get((sha, slot.index), 0)
            self._spec_jobs[(sha, slot.index)] = n + 1
        rotation = n // self.opts.seed_rotation_jobs
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
            msg = {"op": "validate_spec", "job_id": uuid.uuid4().hex, "spec_source": spec_source,
                   "spec_name": spec_name, "options": self._job_options()}
            reply, worker = slot.send(msg)
            self._note_worker(slot)
            if reply.kind != "result":
                slot.replace()
                what = "hung" if reply.kind == "timeout" else "crashed"
                return SpecCheck(ok=False, reason=f"reference {what} when run: {reply.reason}")
            p = reply.payload
            if not p.get("ok"):
                slot.replace()  # a spec that raised may have left state behind
            return SpecCheck(ok=bool(p.get("ok")), reason=str(p.get("reason", "")),
                             warnings=list(p.get("warnings", [])), info=dict(p.get("info", {})))

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False) -> Verdict:
        """Judge one candidate. ``fresh_worker=True`` runs it in a newly started worker (use it
        to re-time finalists: a lucky timing in a warm worker should not make an elite)."""
        if not isinstance(spec_source, str) or not isinstance(candidate_source, str):
            raise InvalidArgumentError("spec_source and candidate_source must be strings")
        if self._pool.closed:
            raise InvalidArgumentError("Judge is closed")
        pre = _spec_precheck(spec_source)
        if pre:
            raise InvalidSpecError(pre)
        t0 = time.monotonic()
        report = static_checks.check_candidate(candidate_source)
        if not self.opts.enforce_static_policy and not report.syntax_error:
            report = static_checks.StaticReport(ok=True)
        if not report.ok:
            status: Status = "compile_error" if report.syntax_error else "rejected"
            v = Verdict(status=status, reason=report.reason, candidate_id=candidate_id, device=self.device,
                        interpreted=self.device == "cpu", fingerprint=dict(self.fingerprint))
            v.evidence["static_findings"] = [f.render() for f in report.findings]
            v.evidence["wall_s"] = round(time.monotonic() - t0, 3)
            return v
        affinity = hashlib.sha256(spec_source.encode()).hexdigest()  # the worker whose cache has the spec
        with self._pool.lease(affinity) as slot:
            seed_opts = self._seed_options(affinity, slot)
            msg = {"op": "evaluate", "job_id": uuid.uuid4().hex, "spec_source": spec_source, "spec_name": "",
                   "candidate_source": candidate_source, "candidate_id": candidate_id,
                   "options": {**self._job_options(), **seed_opts}}
            if fresh_worker and slot.worker is not None and slot.worker.jobs > 0:
                slot.replace()
            reply, worker = slot.send(msg)
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
            v.device = self.device
            v.interpreted = self.device == "cpu"
            if not v.fingerprint:
                v.fingerprint = dict(self.fingerprint)
            if v.interpreted and not any("interpreter" in w for w in v.warnings):
                v.warnings.append("CPU run in the Triton interpreter: timings say nothing about GPU speed")
            v.evidence["worker"] = {"pid": worker.proc.pid, "job_index": worker.jobs, "slot": slot.index}
            v.evidence["wall_s"] = round(time.monotonic() - t0, 3)
            if v.status != "correct" and not self._may_reuse(v):
                # The interpreter, an out-of-bounds access or a half-run candidate can leave
                # the process corrupted: a fresh worker costs ~3 s, a poisoned one costs trust.
                slot.replace()
            elif worker.jobs >= self.opts.max_jobs_per_worker:
                slot.replace()
            else:
                slot.affinity = affinity
            return v

    def evaluate_many(self, jobs: Iterable[EvalJob | Sequence[Any]]) -> list[Verdict]:
        """Judge several candidates, up to ``parallel_workers`` at once; verdicts in input
        order. Items: ``EvalJob`` or ``(spec_source, candidate_source[, candidate_id[,
        fresh_worker]])``. An exception of one job (misuse, an unusable spec) is raised after
        the others have finished."""
        items = [EvalJob.of(j) for j in jobs]
        width = min(self.opts.parallel_workers, len(items))
        if width <= 1:
            return [self.evaluate(j.spec_source, j.candidate_source, j.candidate_id, j.fresh_worker) for j in items]
        with ThreadPoolExecutor(max_workers=width, thread_name_prefix="ke-judge") as ex:
            futures = [ex.submit(self.evaluate, j.spec_source, j.candidate_source, j.candidate_id, j.fresh_worker)
                       for j in items]
            for f in futures:
                f.exception()  # wait for all before raising any
            return [f.result() for f in futures]

    def _may_reuse(self, v: Verdict) -> bool:
        """Whether a worker that produced a non-correct verdict may serve the next job.

        Never after a timeout/crash (the process is gone) or a runtime rejection (the
        candidate changed process state). After a CUDA runtime error the context may be
        poisoned (sticky errors), so only CPU runtime errors qualify.
        """
        reuse = self.opts.reuse_worker_after_failure
        if reuse is None:
            reuse = self.device == "cuda"
        if not reuse:
            return False
        if v.status in ("incorrect", "compile_error"):
            return True
        return v.status == "runtime_error" and self.device == "cpu"


def _spec_precheck(spec_source: str) -> str:
    """Cheap parent-side check: parses and defines the three names (no code runs)."""
    import ast

    try:
        tree = ast.parse(spec_source)
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
