"""`kernelevolve down` stops exactly the recorded processes: by pid *and* start time,
SIGTERM first, SIGKILL of the process group after the grace period."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ke_cli.cluster import Proc, _spawn, _stop, is_ours

# Both sleep far longer than any test runs: only a signal ends them, so a stop that returns
# with them gone killed them (no clock needed to tell it from one that waited them out).
IGNORES_TERM = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                # a child in the same process group, as an evaluator's sandboxed worker would be
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(3600)']); time.sleep(3600)")


def _wait_gone(proc: Proc, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while is_ours(proc) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not is_ours(proc)


def _group_members(pgid: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(stat.parent.name))
    return members


def test_stop_terms_then_kills_the_group(tmp_path: Path) -> None:
    _, polite = _spawn("polite", [sys.executable, "-c", "import time; time.sleep(3600)"], {}, tmp_path)
    _, stubborn = _spawn("stubborn", [sys.executable, "-c", IGNORES_TERM], {}, tmp_path)
    time.sleep(0.5)  # let the stubborn one install its handler and start its child
    assert is_ours(polite) and is_ours(stubborn)
    assert len(_group_members(stubborn.pid)) == 2
    stopped = _stop([polite, stubborn], grace_s=1.0)
    assert sorted(stopped) == ["polite", "stubborn"]
    assert _wait_gone(polite) and _wait_gone(stubborn)
    assert _group_members(stubborn.pid) == []  # its child went with it


def test_a_reused_pid_is_left_alone(tmp_path: Path) -> None:
    _, other = _spawn("other", [sys.executable, "-c", "import time; time.sleep(60)"], {}, tmp_path)
    try:
        recorded = Proc(name="gateway", pid=other.pid, start_time="1", log="")  # same pid, another start
        assert not is_ours(recorded)
        assert _stop([recorded], grace_s=0.5) == []
        assert is_ours(other)
    finally:
        _stop([other], grace_s=1.0)
