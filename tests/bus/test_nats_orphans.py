"""The embedded nats-server never outlives the process that started it, even a SIGKILLed one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

STARTER = """
import sys, time
from pathlib import Path
from kernelevolve.bus.nats_server import NatsServer
server = NatsServer(Path(sys.argv[1]), orphan_guard=sys.argv[2]).start()
print(server.pid, server.guard_pid or 0, flush=True)
time.sleep(600)
"""


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("guard", ["pdeathsig", "watchdog"])
def test_nats_server_dies_with_a_sigkilled_parent(tmp_path: Path, guard: str) -> None:
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(tmp_path / "nats"), guard],
                               stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, start_new_session=True)
    try:
        assert starter.stdout is not None
        server_pid, guard_pid = (int(x) for x in starter.stdout.readline().split())
        assert _running(server_pid)
        assert (guard_pid != 0) == (guard == "watchdog")
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait()
        deadline = time.monotonic() + 10
        while (_running(server_pid) or (guard_pid and _running(guard_pid))) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(server_pid), "nats-server outlived its parent"
        assert not (guard_pid and _running(guard_pid)), "the watchdog outlived its child"
    finally:
        if starter.poll() is None:
            starter.kill()
            starter.wait()


def test_stop_by_handle_also_stops_the_watchdog(tmp_path: Path) -> None:
    from kernelevolve.bus.nats_server import NatsServer

    server = NatsServer(tmp_path / "nats", orphan_guard="watchdog").start()
    pid, guard_pid = server.pid, server.guard_pid
    assert pid and guard_pid and _running(pid) and _running(guard_pid)
    server.stop()
    assert not _running(pid) and not _running(guard_pid)
