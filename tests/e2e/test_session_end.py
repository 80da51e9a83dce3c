"""Stopping the ``kernelevolve`` command leaves nothing behind, and a session always ends.

Signals go to the CLI's process alone (as ``kill``, ``timeout``, CI runners and
orchestrators send them), never to a terminal's process group: SIGINT and SIGTERM stop
the session the way Ctrl-C does (summary, best kernel so far, exit 130 / 143); after
SIGKILL the embedded nats-server and evaluator workers still do not outlive the CLI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO_ROOT

pytestmark = pytest.mark.e2e


def _env() -> dict[str, str]:
    return dict(os.environ, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2",
                KE_EVALUATOR_RUN_TIMEOUT_S="600", KE_EVALUATOR_COMPILE_TIMEOUT_S="600",
                PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p))


class Cli:
    """The command as a child in its own session, so that signals reach it alone."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, *argv], cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self.err = ""
        self._out = threading.Thread(target=self._read, daemon=True)
        self._out.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)

    def wait_line(self, text: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in ln for ln in self.lines):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no {text!r} line; rc={self.proc.poll()} out={''.join(self.lines)[-2000:]}")
            time.sleep(0.05)

    def finish(self, timeout: float = 120) -> int:
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail(f"the command did not exit within {timeout}s after the signal")
        self._out.join(5)
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read()
        return code

    @property
    def stdout(self) -> str:
        return "".join(self.lines)


def _children(pid: int) -> dict[int, str]:
    """Every process whose parent chain leads to ``pid``: pid → command line."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parent[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        p = frontier.pop()
        for child, pp in parent.items():
            if pp == p and child not in found:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    found[child] = "?"
                frontier.append(child)
    return found


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _assert_all_gone(pids: dict[int, str], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = {p: c for p, c in pids.items() if _running(p)}
        if not left:
            return
        time.sleep(0.1)
    for p in left:  # do not leave them to other tests
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pytest.fail(f"left running after the command exited: {left}")


def _embedded_children(cli: Cli) -> dict[int, str]:
    """The nats-server and at least one evaluator worker, as started by the command."""
    deadline = time.monotonic() + 60
    while True:
        kids = _children(cli.proc.pid)
        if any("nats-server" in c for c in kids.values()) and any("ke_evaluator.worker" in c for c in kids.values()):
            return kids
        if time.monotonic() > deadline:
            pytest.fail(f"expected nats-server and a worker among the command's children: {kids}")
        time.sleep(0.1)


CASES = [
    # (signal, stalled): stalled = the only candidate never returns from forward.
    pytest.param(signal.SIGTERM, True, id="SIGTERM-stalled"),
    pytest.param(signal.SIGINT, True, id="SIGINT-stalled"),
    pytest.param(signal.SIGKILL, True, id="SIGKILL-stalled"),
    pytest.param(signal.SIGTERM, False, id="SIGTERM-running", marks=pytest.mark.slow),
    pytest.param(signal.SIGINT, False, id="SIGINT-running", marks=pytest.mark.slow),
    pytest.param(signal.SIGKILL, False, id="SIGKILL-running", marks=pytest.mark.slow),
]


@pytest.mark.parametrize(("sig", "stalled"), CASES)
def test_signal_to_the_command_alone_stops_it_cleanly(tmp_path: Path, sig: signal.Signals, stalled: bool) -> None:
    spec = str(EXAMPLES / "relu_scale_add.py")
    args = ["optimize", spec, "--budget", "40", "--max-inflight", "1", "--out", "run"]
    cli = Cli(["-m", "tests.e2e.injected_cli", "stall", *args] if stalled else ["-m", "ke_cli.main", *args],
              tmp_path)
    # Stalled: the candidate is being judged and never answers. Running: a correct one is in.
    cli.wait_line("generated" if stalled else "evaluated", timeout=180)
    kids = _embedded_children(cli)
    os.kill(cli.proc.pid, sig)
    code = cli.finish()
    _assert_all_gone(kids)
    summary_path = tmp_path / "run" / "summary.json"
    if sig == signal.SIGKILL:
        assert code == -signal.SIGKILL
        return
    assert code == 128 + sig, cli.err
    summary = json.loads(summary_path.read_text())
    assert summary["status"] == "SESSION_STATUS_CANCELLED"
    assert "cancelled" in cli.stdout and f"{sig.name}: cancelling the session" in cli.stdout
    if not stalled:  # the best kernel so far is written
        assert summary["best_candidate_id"] and (tmp_path / "run" / "best_kernel.py").is_file()


def test_permanent_synthesizer_failure_ends_the_command(tmp_path: Path) -> None:
    """The synthesizer fails permanently (an unusable spec): the command does not wait
    forever; it names the service and the cause in one line and exits 2 (the input is at fault)."""
    cli = Cli(["-m", "tests.e2e.injected_cli", "synth-fails", "optimize", str(EXAMPLES / "relu_scale_add.py"),
               "--budget", "4", "--out", "run", "--json"], tmp_path)
    code = cli.finish(timeout=180)
    assert code == 2, cli.err
    out = json.loads(cli.stdout)
    reason = "synthesizer: InvalidSpecError: Model has no __init__ to mirror"
    assert out["status"] == "failed" and out["error"] == reason and out["bad_input"] is True
    assert out["best"] is None
    assert cli.err.strip().splitlines()[-1] == f"kernelevolve: session failed: {reason}"
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status"] == "SESSION_STATUS_FAILED" and summary["error"] == reason


CAUSE = "ModelNew(*get_init_inputs()) raised: NameError: name 'Model' is not defined"
COMMON_ARGS = ["optimize", str(EXAMPLES / "relu_scale_add.py"), "--budget", "2", "--max-inflight", "2", "--out", "run"]


def test_common_construction_failure_is_named_in_the_summary(tmp_path: Path) -> None:
    """Every candidate fails the same way before running: summary.json and the final lines
    say so in one line naming the cause, not only that nothing was found."""
    cli = Cli(["-m", "tests.e2e.injected_cli", "bad-init", *COMMON_ARGS], tmp_path)
    assert cli.finish(timeout=300) == 1, cli.err
    note = f"all 2 candidates failed before running, the same way (compile_error): {CAUSE}"
    assert f"No correct candidate: {note}" in cli.stdout
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["common_failure"].startswith(note) and summary["best_candidate_id"] == ""


@pytest.mark.slow
def test_common_construction_failure_in_json_output(tmp_path: Path) -> None:
    cli = Cli(["-m", "tests.e2e.injected_cli", "bad-init", *COMMON_ARGS, "--json"], tmp_path)
    assert cli.finish(timeout=300) == 1, cli.err
    out = json.loads(cli.stdout)
    assert out["best"] is None and out["status"] == "completed"
    assert out["common_failure"].startswith(
        f"all 2 candidates failed before running, the same way (compile_error): {CAUSE}")
