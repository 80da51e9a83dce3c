"""The evaluator's entry point: ``Judge`` keeps a warm sandboxed worker and returns verdicts.

    with Judge(EvalOptions(device="auto")) as judge:
        check = judge.validate_spec(spec_source, "relu_scale_add")
        verdict = judge.evaluate(spec_source, candidate_source, candidate_id="c1")

Blocking and thread-safe (one evaluation at a time under a lock). Candidate faults are
verdicts, never exceptions; only misuse raises (``InvalidArgumentError``) and an unusable
spec passed to ``evaluate`` raises ``InvalidSpecError``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from dataclasses import asdict, dataclass, field
from typing import Any

from kernelevolve.errors import InvalidArgumentError, InvalidSpecError

from . import protocol, sandbox, static_checks
from .verdict import SpecCheck, Status, Verdict

log = logging.getLogger(__name__)

_PKG_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LOG_TRUNCATE_BYTES = 16 * 2**20


@dataclass
class EvalOptions:
    device: str = "auto"  # "auto" | "cpu" | "cuda"; auto = cuda if torch.cuda.is_available() else cpu
    correctness_trials: int = 5
    compile_timeout_s: float = 120.0  # import + construct + first call (Triton JIT compile)
    run_timeout_s: float = 120.0  # correctness + integrity checks + timing
    time_candidates: bool = True
    scratch_dir: str | os.PathLike[str] | None = None  # root of worker scratch dirs; a temp dir when None
    seed: int | None = None  # base seed of inputs and weights; None = random per evaluation (in evidence)
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
    # Worker reuse: by default a worker is replaced after any non-correct verdict. True keeps
    # it after incorrect / compile_error (and CPU runtime_error): faster, slightly less safe.
    reuse_worker_after_failure: bool = False
    max_jobs_per_worker: int = 50
    # Once a worker has been replaced, keep a pre-started spare (never given a job) so the
    # next replacement is instant. Starting a worker (torch import + CUDA init) took ~3 s
    # and was most of the judge's wall time on an H100 when failures were frequent
    # (bench/RESULTS.md). Costs one idle process (and a CUDA context) while it waits.
    spare_worker: bool = True


@dataclass
class _Reply:
    kind: str  # "result" | "timeout" | "crashed"
    payload: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def _kill_group(pgid: int, fds: tuple[int, ...]) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(code).name
    except ValueError:
        return f"signal {code}"


class _Worker:
    """One sandboxed child process and its pipes."""

    def __init__(self, root: str, device: str, opts: EvalOptions) -> None:
        self.device = device
        self.opts = opts
        self.scratch = tempfile.mkdtemp(prefix="worker-", dir=root)
        self.log_path = os.path.join(self.scratch, "worker.log")
        self.jobs = 0
        self.ready: dict[str, Any] | None = None
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        env = sandbox.child_environment(
            os.environ,
            scratch_dir=self.scratch,
            device=device,
            cuda_visible_devices=opts.cuda_visible_devices,
            pythonpath=_PKG_PARENT,
        )
        # Compiler caches shared by successive workers (writable inside the file-system jail).
        triton_cache = os.path.join(root, "triton-cache")
        inductor_cache = os.path.join(root, "inductor-cache")
        os.makedirs(triton_cache, exist_ok=True)
        os.makedirs(inductor_cache, exist_ok=True)
        env["TRITON_CACHE_DIR"] = triton_cache
        env["TORCHINDUCTOR_CACHE_DIR"] = inductor_cache
        cmd = [sys.executable, "-m", "ke_evaluator.worker", "--job-fd", str(job_r), "--result-fd", str(res_w),
               "--device", device, "--file-size-bytes", str(opts.file_size_limit_bytes)]
        if device == "cpu" and opts.memory_limit_bytes:
            cmd += ["--address-space-bytes", str(opts.memory_limit_bytes)]
        if not opts.network_isolation:
            cmd.append("--no-network-isolation")
        if opts.filesystem_isolation:
            cmd += ["--writable", self.scratch, "--writable", triton_cache, "--writable", inductor_cache]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the worker
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own module
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, cwd=self.scratch, env=env,
            pass_fds=(job_r, res_w), start_new_session=True, close_fds=True,
        )
        os.close(job_r)
        os.close(res_w)
        self.job_fd = job_w
        self.reader = protocol.LineReader(res_r)
        self.res_fd = res_r
        # A Judge dropped without close() must not leave its worker behind.
        self._finalizer = weakref.finalize(self, _kill_group, self.proc.pid, (job_w, res_r))
        log.debug("started evaluation worker pid=%s scratch=%s", self.proc.pid, self.scratch)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 1500) -> str:
        try:
            self._log.flush()
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - limit))
                text = fh.read().decode(errors="replace")
            # Drop the profiler's start/stop chatter; keep what the candidate or Python printed.
            return "\n".join(ln for ln in text.splitlines() if not ln.startswith("USDT:")).strip()
        except OSError:
            return ""

    def wait_ready(self, timeout: float) -> str:
        """'' when ready, else why not."""
        if self.ready is not None:
            return ""
        try:
            msg = self.reader.read(time.monotonic() + timeout)
        except protocol.ChannelTimeout:
            return f"worker did not start within {timeout:.0f} s"
        except protocol.ChannelClosed:
            return f"worker exited during start-up: {self._exit_description()}"
        if msg.get("type") != "ready":
            return f"unexpected first message from worker: {msg.get('type')!r}"
        self.ready = msg
        return ""

    def _exit_description(self) -> str:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "pipe closed but the process is still running"
        tail = self.log_tail()
        if code < 0:
            sig = _signal_name(-code)
            hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (killed: out of memory?)",
                    "SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)",
                    "SIGABRT": " (aborted)", "SIGBUS": " (bus error)"}.get(sig, "")
            desc = f"worker killed by {sig}{hint}"
        else:
            desc = f"worker exited with code {code} without a result"
        return desc + (f"; log tail:\n{tail[-800:]}" if tail else "")

    def request(self, msg: dict[str, Any], compile_timeout: float, run_timeout: float) -> _Reply:
        # Keep the log far below RLIMIT_FSIZE: a chatty earlier candidate must not get a later
        # one killed by SIGXFSZ. The worker's descriptor is O_APPEND, so truncation is safe.
        try:
            if os.path.getsize(self.log_path) > _LOG_TRUNCATE_BYTES:
                os.truncate(self.log_path, 0)
        except OSError:
            pass
        try:
            protocol.write_message(self.job_fd, msg)
        except OSError as exc:
            return _Reply("crashed", reason=f"worker pipe broken: {exc}; {self._exit_description()}")
        self.jobs += 1
        phase = "compile"
        deadline = time.monotonic() + compile_timeout
        while True:
            try:
                reply = self.reader.read(deadline)
            except protocol.ChannelTimeout:
                limit = compile_timeout if phase == "compile" else run_timeout
                what = ("compile phase (import + construct + first call)" if phase == "compile"
                        else "run phase (correctness + timing)")
                return _Reply("timeout", reason=f"{what} exceeded {limit:g} s; worker process group killed")
            except protocol.ChannelClosed:
                return _Reply("crashed", reason=self._exit_description())
            except ValueError as exc:
                return _Reply("crashed", reason=f"worker sent a malformed message: {exc}")
            kind = reply.get("type")
            if kind == "phase":
                phase = reply.get("phase", phase)
                deadline = time.monotonic() + (compile_timeout if phase == "compile" else run_timeout)
            elif kind == "result":
                return _Reply("result", payload=reply.get("payload", {}))

    def kill(self) -> None:
        self._finalizer.detach()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the whole group: anything it spawned too
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("evaluation worker pid=%s did not die after SIGKILL", self.proc.pid)
        for fd in (self.job_fd, self.res_fd):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        shutil.rmtree(self.scratch, ignore_errors=True)

    def shutdown(self) -> None:
        # Ask politely, but a worker holds no state worth saving: do not wait long.
        try:
            protocol.write_message(self.job_fd, {"op": "shutdown"})
            self.proc.wait(timeout=0.5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


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
    """Evaluates candidates against specs in a sandboxed, reusable worker process."""

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
        self._lock = threading.Lock()
        self._worker: _Worker | None = None
        self._spare: _Worker | None = None
        self._closed = False
        self.fingerprint: dict[str, str] = {}
        # What the last worker achieved: network/filesystem isolation, rlimits, launch hooks.
        self.sandbox_info: dict[str, Any] = {}
        self.workers_started = 0

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

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.shutdown()
                self._worker = None
            if self._spare is not None:
                self._spare.kill()
                self._spare = None
            if self._own_root:
                shutil.rmtree(self.root, ignore_errors=True)
            self._closed = True

    def warm_up(self) -> None:
        """Start the worker now and wait until it is ready (torch/triton imported)."""
        with self._lock:
            worker = self._ensure_worker()
            if not worker.wait_ready(self.opts.startup_timeout_s) and worker.ready is not None:
                self.fingerprint = dict(worker.ready.get("fingerprint", {}))
                self.sandbox_info = dict(worker.ready.get("sandbox", {}))

    def _ensure_worker(self) -> _Worker:
        if self._closed:
            raise InvalidArgumentError("Judge is closed")
        if self._worker is not None and not self._worker.alive():
            self._worker.kill()
            self._worker = None
        if self._worker is None:
            spare, self._spare = self._spare, None
            if spare is not None and spare.alive():
                self._worker = spare  # fresh: a spare never ran a job
            else:
                if spare is not None:
                    spare.kill()
                self._worker = _Worker(self.root, self.device, self.opts)
            self.workers_started += 1
        return self._worker

    def _replace_worker(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None
        # Start the replacement right away: its torch import overlaps the caller's work.
        self._ensure_worker()
        if self.opts.spare_worker and self._spare is None:
            # Failures come in runs during a search: have the next replacement ready.
            self._spare = _Worker(self.root, self.device, self.opts)

    def _job_options(self) -> dict[str, Any]:
        o = self.opts
        cuda = self.device == "cuda"
        d = asdict(o)
        d["device"] = self.device
        d["min_timing_trials"] = o.min_timing_trials or (10 if cuda else 3)
        d["max_timing_trials"] = o.max_timing_trials or (200 if cuda else 10)
        return d

    def _send(self, msg: dict[str, Any]) -> tuple[_Reply, _Worker]:
        worker = self._ensure_worker()
        why = worker.wait_ready(self.opts.startup_timeout_s)
        if why:
            log.warning("evaluation worker failed to start (%s); retrying once", why.splitlines()[0])
            self._replace_worker()
            worker = self._ensure_worker()
            why = worker.wait_ready(self.opts.startup_timeout_s)
            if why:
                self._worker = None
                worker.kill()
                return _Reply("crashed", reason=f"evaluation worker failed to start: {why}"), worker
        assert worker.ready is not None
        self.fingerprint = dict(worker.ready.get("fingerprint", {}))
        self.sandbox_info = dict(worker.ready.get("sandbox", {}))
        reply = worker.request(msg, self.opts.compile_timeout_s, self.opts.run_timeout_s)
        return reply, worker

    # -- public API ----------------------------------------------------------------------------
    def validate_spec(self, spec_source: str, spec_name: str) -> SpecCheck:
        if not isinstance(spec_source, str) or not isinstance(spec_name, str):
            raise InvalidArgumentError("spec_source and spec_name must be strings")
        pre = _spec_precheck(spec_source)
        if pre:
            return SpecCheck(ok=False, reason=pre)
        with self._lock:
            msg = {"op": "validate_spec", "job_id": uuid.uuid4().hex, "spec_source": spec_source,
                   "spec_name": spec_name, "options": self._job_options()}
            reply, worker = self._send(msg)
            if reply.kind != "result":
                self._replace_worker()
                what = "hung" if reply.kind == "timeout" else "crashed"
                return SpecCheck(ok=False, reason=f"reference {what} when run: {reply.reason}")
            p = reply.payload
            if not p.get("ok"):
                self._replace_worker()  # a spec that raised may have left state behind
            return SpecCheck(ok=bool(p.get("ok")), reason=str(p.get("reason", "")),
                             warnings=list(p.get("warnings", [])), info=dict(p.get("info", {})))

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False) -> Verdict:
        """Judge one candidate. ``fresh_worker=True`` runs it in a newly started worker (use it
        to re-time finalists: a lucky timing in a warm worker should not make an elite)."""
        if not isinstance(spec_source, str) or not isinstance(candidate_source, str):
            raise InvalidArgumentError("spec_source and candidate_source must be strings")
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
        with self._lock:
            msg = {"op": "evaluate", "job_id": uuid.uuid4().hex, "spec_source": spec_source, "spec_name": "",
                   "candidate_source": candidate_source, "candidate_id": candidate_id,
                   "options": self._job_options()}
            if fresh_worker and self._worker is not None and self._worker.jobs > 0:
                self._replace_worker()
            reply, worker = self._send(msg)
            if reply.kind == "result" and "spec_error" in reply.payload:
                self._replace_worker()
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
            v.evidence["worker"] = {"pid": worker.proc.pid, "job_index": worker.jobs}
            v.evidence["wall_s"] = round(time.monotonic() - t0, 3)
            if v.status != "correct" and not self._may_reuse(v):
                # The interpreter, an out-of-bounds access or a half-run candidate can leave
                # the process corrupted: a fresh worker costs ~3 s, a poisoned one costs trust.
                self._replace_worker()
            elif worker.jobs >= self.opts.max_jobs_per_worker:
                self._replace_worker()
            return v


    def _may_reuse(self, v: Verdict) -> bool:
        """Whether a worker that produced a non-correct verdict may serve the next job.

        Never after a timeout/crash (the process is gone) or a runtime rejection (the
        candidate changed process state). After a CUDA runtime error the context may be
        poisoned (sticky errors), so only CPU runtime errors qualify.
        """
        if not self.opts.reuse_worker_after_failure:
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
