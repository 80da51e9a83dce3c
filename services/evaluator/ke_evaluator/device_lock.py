"""Cross-process reader/writer lock on one device (``fcntl.flock``), for parallel judging.

Workers of one ``Judge`` share a GPU. Compile, correctness, integrity checks and profiling
may overlap (SHARED); a timing phase must have the device to itself (EXCLUSIVE) so no
other worker's kernels, copies or compiles run inside its samples.

Two files in the Judge's root scratch directory:

* ``device.lock`` carries the reader/writer lock itself;
* ``device.gate`` gives writers preference: every acquirer takes the gate exclusively
  while it acquires the lock, and a writer keeps it until it holds the lock, so readers
  that arrive after a waiting writer queue behind it instead of starving it.

flock locks belong to an open file description, so each worker opens the files itself
(``Judge`` creates them; a worker opens them before its file-system jail exists, and
flock works on read-only descriptors anyway). The kernel drops a lock when its process
dies: a worker killed on timeout cannot leave the device locked. Upgrading SHARED to
EXCLUSIVE releases first (flock conversions are not atomic either).

Stdlib only: used in the worker before torch is imported, and by the parent to create
the files.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

Mode = Literal["shared", "exclusive"]
LOCK_NAME = "device.lock"
GATE_NAME = "device.gate"

_now = time.monotonic  # bound at import: a candidate cannot swap what we log with


def create_files(directory: str) -> str:
    """Create the lock files in ``directory`` (idempotent); returns ``directory``."""
    os.makedirs(directory, exist_ok=True)
    for name in (LOCK_NAME, GATE_NAME):
        fd = os.open(os.path.join(directory, name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        os.close(fd)
    return directory


def _open(path: str) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)  # read-only mount: flock still works


class DeviceLock:
    """One process's handle on the device lock. Not thread-safe (one per worker process).

    ``on_wait(mode)`` is called before blocking and ``on_acquired(mode, waited_s)`` after a
    wait ended: the worker tells its parent, which stops the phase clock meanwhile.
    ``drain``, when set, runs before every release: on CUDA the worker sets it to a device
    synchronize, so work it queued never runs inside the next holder's timed samples.
    """

    def __init__(self, directory: str, on_wait: Callable[[str], None] | None = None,
                 on_acquired: Callable[[str, float], None] | None = None,
                 drain: Callable[[], None] | None = None) -> None:
        self.directory = directory
        self._lock_fd = _open(os.path.join(directory, LOCK_NAME))
        self._gate_fd = _open(os.path.join(directory, GATE_NAME))
        self._on_wait = on_wait
        self._on_acquired = on_acquired
        self.drain = drain
        self.mode: Mode | None = None
        self._since = 0.0
        # Per job, reset by the caller: seconds waited per mode and (mode, start, end) holds.
        self.waited: dict[str, float] = {}
        self.held: list[tuple[str, float, float]] = []

    def reset_stats(self) -> None:
        self.waited = {}
        self.held = []

    def evidence(self) -> dict[str, object]:
        """Waits and holds since ``reset_stats`` (times: the machine's monotonic clock)."""
        return {"waited_s": {k: round(x, 4) for k, x in self.waited.items()},
                "held": [[m, round(a, 4), round(b, 4)] for m, a, b in self.held]}

    def _flock(self, fd: int, op: int, mode: Mode, state: dict[str, bool]) -> None:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if not state["waiting"]:
            state["waiting"] = True
            if self._on_wait is not None:
                self._on_wait(mode)
        fcntl.flock(fd, op)

    def acquire(self, mode: Mode) -> float:
        """Hold the lock in ``mode`` (releasing another mode first). Returns seconds waited."""
        if self.mode == mode:
            return 0.0
        if self.mode is not None:
            self.release()
        t0 = _now()
        state = {"waiting": False}
        self._flock(self._gate_fd, fcntl.LOCK_EX, mode, state)
        try:
            self._flock(self._lock_fd, fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX, mode, state)
        finally:
            fcntl.flock(self._gate_fd, fcntl.LOCK_UN)
        self.mode = mode
        self._since = _now()
        waited = self._since - t0
        self.waited[mode] = self.waited.get(mode, 0.0) + waited
        if state["waiting"] and self._on_acquired is not None:
            self._on_acquired(mode, waited)
        return waited

    def release(self) -> None:
        if self.mode is None:
            return
        if self.drain is not None:
            try:
                self.drain()
            except Exception:  # noqa: BLE001 - the lock goes regardless; a device fault shows in the job's calls
                pass
        end = _now()  # before unlocking: recorded holds of different processes never overlap
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        except OSError:
            pass  # descriptor gone (closed under us): nothing is held through it any more
        self.held.append((self.mode, self._since, end))
        self.mode = None

    def writer_waiting(self) -> bool:
        """True when some process is between gate and lock: a writer queued behind the
        current readers (a reader passes the gate in microseconds, so a false positive
        only costs one needless step aside)."""
        try:
            fcntl.flock(self._gate_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._gate_fd, fcntl.LOCK_UN)
        return False

    def step_aside(self) -> float:
        """A SHARED holder between two steps of its work: when a writer waits, release and
        queue again behind it. Without this a timing phase waits for every reader's whole
        check phase (seconds) instead of one step of it. Returns seconds waited."""
        if self.mode != "shared" or not self.writer_waiting():
            return 0.0
        self.release()
        return self.acquire("shared")

    def try_acquire(self, mode: Mode) -> bool:
        """Non-blocking acquire (tests, diagnostics): True when held now."""
        if self.mode is not None:
            self.release()
        try:
            fcntl.flock(self._gate_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            fcntl.flock(self._lock_fd, (fcntl.LOCK_SH if mode == "shared" else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        finally:
            fcntl.flock(self._gate_fd, fcntl.LOCK_UN)
        self.mode = mode
        self._since = _now()
        return True

    @contextmanager
    def hold(self, mode: Mode) -> Iterator[float]:
        waited = self.acquire(mode)
        try:
            yield waited
        finally:
            self.release()

    def close(self) -> None:
        self.release()
        for fd in (self._lock_fd, self._gate_fd):
            try:
                os.close(fd)
            except OSError:
                pass
