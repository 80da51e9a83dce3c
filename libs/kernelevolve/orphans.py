"""Children must not outlive the process that started them, even when it is SIGKILLed.

Two mechanisms, because neither covers every case:

- ``parent_death_preexec`` (Linux): the kernel sends the child a signal when its parent
  dies (``prctl(PR_SET_PDEATHSIG)``). The "parent" is the *thread* that forked the child,
  so use it only for children started from a thread that lives as long as the process
  (the main thread, where the embedded runner starts nats-server).
- ``guard_process`` (any POSIX): a small watchdog process that stops the child when its
  own parent (our process) changes, for platforms without PDEATHSIG;
  ``watch_parent`` is the in-process form for our own Python children (evaluator workers),
  which may be started from short-lived pool threads.

``python -m kernelevolve.orphans PARENT_PID CHILD_PID`` runs the watchdog.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_POLL_S = 0.5


def parent_death_preexec(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child get ``sig`` when this process dies; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: no loading after fork
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # died between fork and prctl: the signal will never come
            os._exit(1)

    return preexec


def guard_process(child_pid: int) -> subprocess.Popen[bytes]:
    """Start a watchdog that stops ``child_pid`` when this process dies; stop it by handle."""
    return subprocess.Popen(  # noqa: S603 - fixed argv, our own module
        [sys.executable, "-m", "kernelevolve.orphans", str(os.getpid()), str(child_pid)],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def watch_parent(on_orphan: Callable[[], None], interval_s: float = _POLL_S) -> threading.Thread:
    """Call ``on_orphan`` (in a daemon thread) once this process's parent has changed."""
    parent = os.getppid()

    def run() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        on_orphan()

    t = threading.Thread(target=run, name="orphan-watch", daemon=True)
    t.start()
    return t


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists (someone else's counts) and is not a zombie
    (killed, not yet reaped: it holds nothing and will do nothing more)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return _proc_state(pid) not in ("Z", "X")


def _proc_state(pid: int) -> str:
    """The state letter of /proc/PID/stat ("" where there is no /proc)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else ""


def _stop(pid: int, grace_s: float = 5.0) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and pid_alive(pid):
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    parent, child = int(args[0]), int(args[1])
    while pid_alive(child):
        if os.getppid() != parent:
            _stop(child)
            return 0
        time.sleep(_POLL_S)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
