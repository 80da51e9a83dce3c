"""The worker process: a sandboxed child that judges candidates sent by ``judge.Judge``.

Started as ``python -m ke_evaluator.worker --job-fd R --result-fd W --device BACKEND ...``
(a device backend's name, ``ke_evaluator.backends``)
with a scrubbed environment, cwd = its scratch directory, in its own process group.
It cuts itself off the network and applies resource limits *before* importing torch or
any candidate, imports torch/triton once, then serves jobs (see ``ke_evaluator.wire``) until told
to stop or its job pipe closes. Importable with only torch + triton + numpy + stdlib.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import sys
import time
from functools import partial
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..phase_limits import ReferenceCost


class _StepClock:
    """Seconds per start-up step (``sandbox["startup_s"]``): start-up is paid once per
    worker, and it decides how soon a Judge is useful and how much a replacement costs."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self._t = time.monotonic()

    def mark(self, step: str) -> None:
        now = time.monotonic()
        self.steps[step] = round(self.steps.get(step, 0.0) + now - self._t, 3)
        self._t = now


def _fingerprint(device: Any, backend: Any) -> dict[str, str]:
    import numpy
    import torch
    import triton

    fp = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "numpy": numpy.__version__,
        "device": device.type,
        "triton_interpret": os.environ.get("TRITON_INTERPRET", "0"),
        "cpu_threads": str(torch.get_num_threads()),
    }
    if backend.name != backend.torch_device_type:
        fp["backend"] = backend.name  # e.g. rocm: torch's device type says "cuda"
    fp.update(backend.fingerprint(device))
    return fp


class _Phases:
    """Tells the parent where a job is (it restarts its phase clock) and keeps this worker's
    CPU-time backstop (``isolation.set_cpu_budget``) in step with the same limits
    (``phase_limits``): the job's stored reference cost, or the one its measure phase found."""

    def __init__(self, out_fd: int, job_id: str, options: dict[str, Any]) -> None:
        from .. import phase_limits

        self.out_fd = out_fd
        self.job_id = job_id
        self.policy = phase_limits.LimitPolicy.from_job_options(options)
        self.cost = phase_limits.ReferenceCost.from_dict(options.get("reference_cost"))

    def __call__(self, name: str, cost: ReferenceCost | None = None) -> None:
        from .. import wire
        from . import isolation

        msg: dict[str, Any] = {"type": "phase", "job_id": self.job_id, "phase": name}
        if cost is not None:  # the measure phase's result, reported as it ends
            self.cost = cost
            msg["reference_cost"] = cost.to_dict()
        limit = self.policy.limits(self.cost).seconds(name)
        isolation.set_cpu_budget(limit * max(1, os.cpu_count() or 1) + 5)
        wire.write_message(self.out_fd, msg)


def _sleep_unlocked(lock: Any, seconds: float) -> None:
    """A start-up wait for device memory: let the SHARED device lock go meanwhile, so the
    job whose memory we wait for can still take it EXCLUSIVE for its timing."""
    if lock is not None:
        lock.release()
    time.sleep(seconds)
    if lock is not None:
        lock.acquire("shared")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ke_evaluator.worker")
    ap.add_argument("--job-fd", type=int, required=True)
    ap.add_argument("--result-fd", type=int, required=True)
    ap.add_argument("--device", required=True, help="device backend name (cpu, cuda, rocm or a registered one)")
    ap.add_argument("--backend-factory", default="",
                    help="module:name of a backend registered outside the evaluator (register_backend)")
    ap.add_argument("--backend-path", default="", help="source root to import --backend-factory from")
    ap.add_argument("--address-space-bytes", type=int, default=0)
    ap.add_argument("--file-size-bytes", type=int, default=0)
    ap.add_argument("--no-network-isolation", action="store_true")
    ap.add_argument("--writable", action="append", default=[],
                    help="directory that stays writable; with at least one, every other mount is read-only")
    ap.add_argument("--device-lock", default="",
                    help="directory of the device lock files shared by the Judge's workers (device_lock.py)")
    args = ap.parse_args(argv)

    # Anything printed (by us, torch or a candidate) goes to the log, never to the protocol.
    os.dup2(2, 1)

    clock = _StepClock()
    from .. import device_lock, wire
    from ..backends import registry
    from . import isolation

    out_fd = args.result_fd
    lock = None
    if args.device_lock:
        # Opened before the file-system jail. The parent stops its phase clock while we wait.
        lock = device_lock.DeviceLock(
            args.device_lock,
            on_wait=lambda mode: wire.write_message(out_fd, {"type": "lock_wait", "mode": mode}),
            on_acquired=lambda mode, waited: wire.write_message(
                out_fd, {"type": "lock_held", "mode": mode, "waited_s": round(waited, 4)}))
    sandbox_info: dict[str, Any] = {}
    sandbox_info["network"] = "not isolated" if args.no_network_isolation else isolation.isolate_network()
    sandbox_info["filesystem"] = (isolation.isolate_filesystem(args.writable) if args.writable
                                  else "not isolated")
    sandbox_info["rlimits"] = isolation.apply_rlimits(
        address_space_bytes=args.address_space_bytes or None,
        file_size_bytes=args.file_size_bytes or None,
    )
    sandbox_info["cwd"] = "scratch"
    # The judge's process can die without stopping us (SIGKILL), and we may be busy in a
    # candidate that never reads the job pipe: leave with our whole group once orphaned.
    # Started after the sandbox (unshare of a user namespace needs a single thread) and
    # before the thread baselines of the integrity checks.
    from kernelevolve.orphans import watch_parent

    watch_parent(lambda: os.killpg(0, signal.SIGKILL))
    clock.mark("sandbox")

    import torch

    from . import (
        compile_release,
        diagnosis,
        evaluation,
        global_state,
        launch_counter,
        memory,
        precision,
        spec_validation,
        warm_up,
    )

    clock.mark("import")

    sandbox_info["launch_hooks"] = launch_counter.install()
    if args.backend_factory:  # imported after the sandbox like any other module of ours
        registry.register_backend(args.device, registry.load_target(args.backend_factory, args.backend_path))
    backend = registry.get_backend(args.device)
    global_state.watch_timers(backend.timer_objects())
    if not backend.accelerated:
        sandbox_info["autotune"] = ("first config (no benchmarking in the interpreter)"
                                    if launch_counter.skip_autotune_benchmarks() else "unavailable")
    device = backend.torch_device()
    release = None
    if lock is not None and backend.accelerated:
        lock.drain = backend.synchronize  # before every release: see DeviceLock.drain
        release = compile_release.CompileRelease(lock)
        sandbox_info["compile_lock"] = compile_release.install(release)
    # Device work of the start-up (context, warm-up kernels, the first Triton compile and
    # launch) must not land inside another worker's timed samples: SHARED lock meanwhile.
    if lock is not None:
        lock.acquire("shared")
    clock.mark("lock_wait")
    if backend.accelerated:
        why = memory.start_device(device, sleep=partial(_sleep_unlocked, lock), init=backend.start)
        if why:
            # Not a candidate's fault: the Judge reports the device as unavailable.
            wire.write_message(out_fd, {"type": "startup_failed", "reason": why})
            return 3
    # torch's float32 defaults as a fresh process has them: the base of the default contract
    # (precision.py), read before any job or spec sets a flag.
    precision.capture_defaults()
    # Start torch's intra-op thread pool (and the profiler's thread, below) now so a later thread-count check sees only
    # threads the candidate created.
    with torch.no_grad():
        a = torch.randn(256, 256, device=device)
        (a @ a).sum().item()
        torch.softmax(a, dim=-1).sum().item()
    clock.mark("device_init")
    warmed_device = warm_up.warm_device(device, backend)
    if lock is not None:
        lock.release()
    clock.mark("triton_first_compile")
    # The profiler starts a persistent native thread on first use: start it now too, unlocked:
    # the profiled op is a CPU op, so nothing of it reaches the device. (Held under the lock
    # its start-up, then 5-6 s with the Inductor import that diagnosis.py now avoids, kept
    # another worker's timing phase waiting after every replacement: bench/RESULTS.md.)
    cpu_a = torch.randn(64, 64)
    diagnosis.library_time_fraction(lambda: cpu_a @ cpu_a, device.type, set(), backend)
    clock.mark("profiler")
    sandbox_info["warmed"] = warm_up.warm_host() + warmed_device
    clock.mark("flop_counter")
    if release is not None:
        release.released = 0  # count the candidates' compiles only
    fingerprint = _fingerprint(device, backend)
    scratch = os.getcwd()
    evaluator = evaluation.Evaluator(scratch, device, fingerprint, lock=lock, compile_release=release,
                                     backend=backend)
    reader = wire.LineReader(args.job_fd)
    sandbox_info["device_lock"] = "shared for checks, exclusive for timing" if lock is not None else "none"
    clock.mark("fingerprint")
    sandbox_info["startup_s"] = clock.steps
    wire.write_message(out_fd, {"type": "ready", "fingerprint": fingerprint, "sandbox": sandbox_info})

    while True:
        try:
            msg = reader.read(None)
        except wire.ChannelClosed:
            return 0
        op = msg.get("op")
        if op == "shutdown":
            return 0
        job_id = msg.get("job_id", "")
        phase = _Phases(out_fd, job_id, msg.get("options", {}))

        if op == "evaluate":
            payload = evaluator.evaluate(msg, phase)
            payload.setdefault("evidence", {})
            if isinstance(payload.get("evidence"), dict):
                payload["evidence"]["sandbox"] = sandbox_info
        elif op == "validate_spec":
            try:
                if lock is not None:
                    lock.acquire("shared")
                payload = spec_validation.validate(msg, scratch, device, evaluator.spec_cache, phase)
            finally:
                if lock is not None:
                    lock.release()
        else:
            payload = {"error": f"unknown op {op!r}"}
        memory.release_cached(device, backend)
        sys.stderr.flush()
        wire.write_message(out_fd, {"type": "result", "job_id": job_id, "payload": payload})

