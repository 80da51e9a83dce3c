"""Worker processes of a ``Judge`` and the pool that shares them between callers.

``WorkerProcess``: one sandboxed child (``python -m ke_evaluator.worker``) and its pipes;
the phase clocks (measure / compile / run limits: ``phase_limits.JobLimits``) run here,
paused while the worker waits for the device lock (``device_lock.py``): a wait is not the
candidate's time, and the holder it waits for is bounded by its own limits. A wait longer
than ``lock_wait_timeout`` (default: the sum of every other worker's longest limits, so
unreachable unless something is broken) ends the job as a timeout.

``Slot``: one place in the pool: its warm worker, the pre-started spare that replaces it
after a failure, and the spec/seed its worker's reference cache holds (affinity).

``WorkerPool``: ``parallel_workers`` slots; ``lease()`` hands an idle one to one caller at
a time, preferring the slot whose cache holds the caller's spec.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports import verdict as _verdict

from .. import backends, wire
from ..phase_limits import JobLimits
from . import worker_environment
from .options import EvalOptions

log = logging.getLogger(__name__)

# The worker imports ke_evaluator and the shared library's stdlib-only parts (the verdict
# types, the orphan guard): both folders go on its path, wherever the two packages live
# (an installed wheel, a checkout run from source on a GPU host).
_PKG_PARENT = os.pathsep.join(dict.fromkeys((
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(_verdict.__file__)))))))
_LOG_TRUNCATE_BYTES = 16 * 2**20


class _PhaseClock:
    """Deadline of the current phase, paused while the worker waits for the device lock."""

    def __init__(self, limit: float, lock_wait_timeout: float) -> None:
        self.deadline = time.monotonic() + limit
        self.lock_wait_timeout = lock_wait_timeout
        self.paused: float | None = None  # seconds of the phase left, while waiting

    def restart(self, limit: float) -> None:
        self.deadline = time.monotonic() + limit
        self.paused = None

    def observe(self, msg: dict[str, Any]) -> bool:
        """Handle a lock message; False for any other message."""
        kind = msg.get("type")
        now = time.monotonic()
        if kind == "lock_wait":
            if self.paused is None:
                self.paused = max(0.0, self.deadline - now)
                self.deadline = now + self.lock_wait_timeout
            return True
        if kind == "lock_held":
            if self.paused is not None:
                self.deadline = now + self.paused
                self.paused = None
            return True
        return False


@dataclass
class _Reply:
    kind: str  # "result" | "timeout" | "crashed" | "unavailable" (the device could not start a worker)
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


class WorkerProcess:
    """One sandboxed child process and its pipes."""

    exit_wait_s = 5.0  # how long a worker whose pipe closed gets to exit before we describe it

    def __init__(self, root: str, device: str, opts: EvalOptions, lock_dir: str = "") -> None:
        self.device = device
        self.opts = opts
        self.scratch = tempfile.mkdtemp(prefix="worker-", dir=root)
        self.log_path = os.path.join(self.scratch, "worker.log")
        self.jobs = 0
        self.ready: dict[str, Any] | None = None
        # Why the worker could not start its device (out of memory after its retries): an
        # infrastructure failure, never a candidate's verdict.
        self.startup_failed = ""
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        env = worker_environment.child_environment(
            os.environ,
            scratch_dir=self.scratch,
            device=device,
            cuda_visible_devices=opts.sandbox.cuda_visible_devices,
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
               "--device", device, "--file-size-bytes", str(opts.sandbox.file_size_limit_bytes)]
        backend = backends.registration(device)
        if backend.factory is not None:  # registered in this process: the worker imports it anew
            cmd += ["--backend-factory", backend.target, "--backend-path", backend.path]
        # A GPU context maps far more address space than it uses: the limit is for the host alone.
        if not backends.get_backend(device).accelerated and opts.sandbox.memory_limit_bytes:
            cmd += ["--address-space-bytes", str(opts.sandbox.memory_limit_bytes)]
        if not opts.sandbox.network_isolation:
            cmd.append("--no-network-isolation")
        if opts.sandbox.filesystem_isolation:
            cmd += ["--writable", self.scratch, "--writable", triton_cache, "--writable", inductor_cache]
        if lock_dir:
            cmd += ["--device-lock", lock_dir]
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the worker
        self.proc = subprocess.Popen(  # noqa: S603 - fixed argv, our own module
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, cwd=self.scratch, env=env,
            pass_fds=(job_r, res_w), start_new_session=True, close_fds=True,
        )
        os.close(job_r)
        os.close(res_w)
        self.job_fd = job_w
        self.reader = wire.LineReader(res_r)
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

    def wait_ready(self, timeout: float, lock_wait_timeout: float = 0.0) -> str:
        """'' when ready, else why not. Time spent waiting for the device lock (the start-up
        warms the device under a SHARED lock) does not count against ``timeout``."""
        if self.ready is not None:
            return ""
        clock = _PhaseClock(timeout, lock_wait_timeout)
        while True:
            try:
                msg = self.reader.read(clock.deadline)
            except wire.ChannelTimeout:
                if clock.paused is not None:
                    return f"worker waited more than {lock_wait_timeout:.0f} s for the device lock during start-up"
                return f"worker did not start within {timeout:.0f} s"
            except wire.ChannelClosed:
                return f"worker exited during start-up: {self._exit_description()}"
            except ValueError as exc:
                return f"worker sent a malformed message during start-up: {exc}"
            if clock.observe(msg):
                continue
            if msg.get("type") == "startup_failed":
                self.startup_failed = str(msg.get("reason", "device start-up failed"))
                return f"worker could not start its device: {self.startup_failed}"
            if msg.get("type") != "ready":
                return f"unexpected first message from worker: {msg.get('type')!r}"
            self.ready = msg
            return ""

    def _exit_description(self) -> str:
        code: int | None
        try:
            code = self.proc.wait(timeout=self.exit_wait_s)
        except subprocess.TimeoutExpired:
            # Seen on an H100 with a 1.64e9-element convolution: the worker's pipe closed and the
            # process did not end within 5 s (a device fault's teardown can be slow). Its log
            # is the only account of what happened, so it goes into the verdict either way.
            code = None
        tail = self.log_tail()
        if code is None:
            desc = "pipe closed but the process is still running"
        elif code < 0:
            sig = _signal_name(-code)
            hint = {"SIGSEGV": " (segmentation fault)", "SIGKILL": " (killed: out of memory?)",
                    "SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)",
                    "SIGABRT": " (aborted)", "SIGBUS": " (bus error)"}.get(sig, "")
            desc = f"worker killed by {sig}{hint}"
        else:
            desc = f"worker exited with code {code} without a result"
        return desc + (f"; log tail:\n{tail[-800:]}" if tail else "")

    def request(self, msg: dict[str, Any], limits: JobLimits, lock_wait_timeout: float = 0.0) -> _Reply:
        """Send a job and wait for its result, each phase under ``limits`` (which may learn
        the reference's cost from the job's measure phase on the way)."""
        # Keep the log far below RLIMIT_FSIZE: a chatty earlier candidate must not get a later
        # one killed by SIGXFSZ. The worker's descriptor is O_APPEND, so truncation is safe.
        try:
            if os.path.getsize(self.log_path) > _LOG_TRUNCATE_BYTES:
                os.truncate(self.log_path, 0)
        except OSError:
            pass
        try:
            wire.write_message(self.job_fd, msg)
        except OSError as exc:
            return _Reply("crashed", reason=f"worker pipe broken: {exc}; {self._exit_description()}")
        self.jobs += 1
        clock = _PhaseClock(limits.seconds(), lock_wait_timeout)
        while True:
            try:
                reply = self.reader.read(clock.deadline)
            except wire.ChannelTimeout:
                if clock.paused is not None:
                    return _Reply("timeout", reason=f"waited more than {lock_wait_timeout:g} s for the device lock "
                                                    "(held by other workers); worker process group killed")
                return _Reply("timeout", reason=f"{limits.explain()}; worker process group killed")
            except wire.ChannelClosed:
                return _Reply("crashed", reason=self._exit_description())
            except ValueError as exc:
                return _Reply("crashed", reason=f"worker sent a malformed message: {exc}")
            kind = reply.get("type")
            if clock.observe(reply):
                continue
            if kind == "phase":
                if limits.enter(reply):
                    clock.restart(limits.seconds())
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
            wire.write_message(self.job_fd, {"op": "shutdown"})
            self.proc.wait(timeout=0.5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class Slot:
    """One place of the pool: a warm worker, its spare and its replacement policy. Used by
    one caller at a time (``WorkerPool.lease``)."""

    def __init__(self, index: int, spawn: Callable[[], WorkerProcess], opts: EvalOptions,
                 lock_wait_timeout: float, spare_early: bool = False) -> None:
        self.index = index
        self.spare_early = spare_early
        self._spawn = spawn
        self.opts = opts
        self.lock_wait_timeout = lock_wait_timeout
        self.worker: WorkerProcess | None = None
        self.spare: WorkerProcess | None = None
        self.started = 0
        # Spec/seed key of the last job its worker ran: that worker's reference cache holds it.
        self.affinity = ""
        self.fingerprint: dict[str, str] = {}
        self.sandbox_info: dict[str, Any] = {}

    def ensure(self) -> WorkerProcess:
        if self.worker is not None and not self.worker.alive():
            self.worker.kill()
            self.worker = None
        if self.worker is None:
            spare, self.spare = self.spare, None
            if spare is not None and spare.alive():
                self.worker = spare  # fresh: a spare never ran a job
            else:
                if spare is not None:
                    spare.kill()
                self.worker = self._spawn()
            self.started += 1
            self.affinity = ""
            if self.spare_early and self.spare is None:
                self.spare = self._spawn()  # ready before the first failure needs it
        return self.worker

    def replace(self) -> None:
        if self.worker is not None:
            self.worker.kill()
            self.worker = None
        # Start the replacement right away: its torch import overlaps the caller's work.
        self.ensure()
        if self.opts.pool.spare_worker and self.spare is None:
            # Failures come in runs during a search: have the next replacement ready.
            self.spare = self._spawn()

    def wait_ready(self) -> str:
        worker = self.ensure()
        why = worker.wait_ready(self.opts.sandbox.startup_timeout_s, self.lock_wait_timeout)
        if not why and worker.ready is not None:
            self.fingerprint = dict(worker.ready.get("fingerprint", {}))
            self.sandbox_info = dict(worker.ready.get("sandbox", {}))
        return why

    def send(self, msg: dict[str, Any], limits: JobLimits) -> tuple[_Reply, WorkerProcess]:
        worker = self.ensure()
        why = self.wait_ready()
        if why:
            log.warning("evaluation worker failed to start (%s); retrying once", why.splitlines()[0])
            self.replace()
            worker = self.ensure()
            why = self.wait_ready()
            if why:
                self.worker = None
                worker.kill()
                if worker.startup_failed:
                    return _Reply("unavailable", reason=f"evaluation worker failed to start: {why}"), worker
                return _Reply("crashed", reason=f"evaluation worker failed to start: {why}"), worker
        reply = worker.request(msg, limits, self.lock_wait_timeout)
        return reply, worker

    def interrupt(self) -> None:
        """Kill this slot's processes under a running job (from another thread): the job
        then ends at once as crashed instead of running to its timeout."""
        for w in (self.worker, self.spare):
            if w is not None:
                try:
                    os.killpg(w.proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        if self.worker is not None:
            self.worker.shutdown()
            self.worker = None
        if self.spare is not None:
            self.spare.kill()
            self.spare = None


class WorkerPool:
    """``size`` slots shared by concurrent callers; each caller leases one idle slot."""

    def __init__(self, slots: list[Slot]) -> None:
        self.slots = slots
        self._idle = list(slots)
        self._cond = threading.Condition()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @contextmanager
    def lease(self, affinity: str = "") -> Iterator[Slot]:
        """An idle slot for the caller alone; waits while all are busy. Prefers the slot whose
        worker last ran ``affinity`` (its reference cache), then one with a warm worker."""
        with self._cond:
            while not self._idle:
                if self._closed:
                    raise InvalidArgumentError("Judge is closed")
                self._cond.wait()
            if self._closed:
                raise InvalidArgumentError("Judge is closed")
            slot = min(self._idle, key=lambda s: (not affinity or s.affinity != affinity, s.worker is None, s.index))
            self._idle.remove(slot)
        try:
            yield slot
        finally:
            with self._cond:
                self._idle.append(slot)
                self._cond.notify_all()

    def close(self, abort: bool = False) -> None:
        """Refuse new leases, wait for the running ones, stop every worker. ``abort``: nobody
        waits for the running jobs any more (the service is stopping), so kill their workers
        (again, should a job retry on a fresh one) instead of waiting up to their timeouts."""
        with self._cond:
            self._closed = True
            while len(self._idle) < len(self.slots):
                if abort:
                    for slot in self.slots:
                        if slot not in self._idle:
                            slot.interrupt()
                self._cond.wait(timeout=0.2 if abort else None)
        for slot in self.slots:
            slot.close()
