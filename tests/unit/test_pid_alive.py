"""kernelevolve.orphans.pid_alive: the one liveness check of run locks, embedded-session
records and the orphan watchdog."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from kernelevolve.orphans import pid_alive


@pytest.mark.parametrize("pid", [0, -1])
def test_no_process_has_a_non_positive_pid(pid: int) -> None:
    assert not pid_alive(pid)  # os.kill(0, 0) would signal our own process group


def test_a_running_process_is_alive_and_an_ended_one_is_not() -> None:
    assert pid_alive(os.getpid())
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # reaped: the pid no longer exists
    assert not pid_alive(proc.pid)


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="zombie state read from /proc")
def test_a_killed_unreaped_child_is_not_alive() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(proc.pid)
        proc.kill()
        deadline = time.monotonic() + 10
        while pid_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)  # not reaped yet: a zombie, which holds nothing
        assert not pid_alive(proc.pid)
        assert os.path.exists(f"/proc/{proc.pid}")  # still there, as a zombie
    finally:
        proc.kill()
        proc.wait()
