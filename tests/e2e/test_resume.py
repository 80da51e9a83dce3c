"""A session killed with SIGKILL at any point continues with ``kernelevolve resume``:
no completed evaluation is lost or repeated, the budget holds, the best kernel is verified.

Each test SIGKILLs a real ``kernelevolve optimize`` at a named point (``killing_cli``),
then runs the real ``kernelevolve resume`` on its run folder, then reads the session's
events back from the run folder's own bus (``RUN_DIR/.nats``) to count them.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES, REPO_ROOT

pytestmark = pytest.mark.e2e

SPEC = EXAMPLES / "relu_scale_add.py"
CLI = [sys.executable, "-m", "ke_cli.main"]
KILLING = [sys.executable, "-m", "tests.e2e.killing_cli"]


def _env(**extra: str) -> dict[str, str]:
    # Short ack waits: work a killed process held comes back within seconds, not a minute.
    return dict(os.environ, **extra, KE_KNOWLEDGE_EMBEDDER="hash", KE_EVALUATOR_CORRECTNESS_TRIALS="2",
                KE_BUS_ACK_WAIT_S="3", KE_EVALUATOR_ACK_WAIT_S="4", KE_EVALUATOR_TIMING_MIN_TRIALS="3",
                KE_EVALUATOR_TIMING_MAX_TRIALS="3",
                PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p))


def _run(argv: list[str], cwd: Path, timeout: float = 400, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=timeout)


def _killed(point: str, n: int, cwd: Path, budget: int = 3, run: str = "run", **env: str) -> Path:
    proc = _run([*KILLING, point, str(n), "optimize", str(SPEC), "--budget", str(budget), "--out", run,
                 "--max-inflight", "1", "--json"], cwd, **env)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, proc.stderr[-3000:])
    run_dir = cwd / run
    assert not (run_dir / "summary.json").exists()
    return run_dir


def _events(run_dir: Path, sid: str) -> list[Any]:
    """Every event of the session, read from the run folder's own JetStream data."""
    from kernelevolve.bus.jetstream import JetStreamBus
    from kernelevolve.bus.nats_server import NatsServer
    from kernelevolve.bus.subjects import Subjects
    from kernelevolve.config import BusSettings

    async def read() -> list[Any]:
        bus = await JetStreamBus.connect(BusSettings(url=server.url))
        out = []
        try:
            async for env in bus.watch(Subjects().session(sid)):
                out.append(env)
                if env.WhichOneof("payload") == "session_completed":
                    break
        finally:
            await bus.close()
        return out

    server = NatsServer(run_dir / ".nats")
    server.start()
    try:
        return asyncio.run(asyncio.wait_for(read(), 60))
    finally:
        server.stop()


def _check_finished(run_dir: Path, proc: subprocess.CompletedProcess[str], budget: int,
                    retimed_best: bool = True) -> dict[str, Any]:
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "completed"
    assert out["best"] and out["best"]["status"] == "correct"
    assert (run_dir / "best_kernel.py").is_file() and (run_dir / "summary.json").is_file()
    assert (run_dir / "report.html").is_file()
    assert not (run_dir / ".lock").exists()
    events = _events(run_dir, out["session_id"])
    kinds = Counter(e.WhichOneof("payload") for e in events)
    evaluated = Counter(e.evaluation_completed.result.candidate_id for e in events
                        if e.WhichOneof("payload") == "evaluation_completed")
    generated = {e.candidate_generated.candidate.candidate_id for e in events
                 if e.WhichOneof("payload") == "candidate_generated"}
    assert evaluated and max(evaluated.values()) == 1, evaluated  # none repeated
    assert set(evaluated) == generated  # none lost
    assert len(evaluated) <= budget and out["evaluated"] == len(evaluated)
    assert kinds["session_completed"] == 1
    retimed = Counter(e.candidate_retimed.result.candidate_id for e in events
                      if e.WhichOneof("payload") == "candidate_retimed")
    assert not retimed or max(retimed.values()) == 1
    if retimed_best:
        assert out["best"]["candidate_id"] in retimed  # the best was verified in a fresh worker
    return out


@pytest.mark.parametrize("point", ["evaluation"])
def test_resume_after_sigkill_mid_evaluation(tmp_path: Path, point: str) -> None:
    # No finalist re-timing here (the slow tests re-time): the one default-run test stays short.
    no_retime = {"KE_SEARCH_FINALISTS": "0"}
    run_dir = _killed(point, 2, tmp_path, budget=2, **no_retime)
    reports = sorted(p.stem for p in (run_dir / "reports").glob("*.json"))
    assert len(reports) == 1  # one completed before the kill; the second was in flight
    status = json.loads(_run([*CLI, "sessions", "list", "--root", str(tmp_path), "--json"], tmp_path).stdout)
    assert [s["status"] for s in status["sessions"]] == ["stopped"]
    assert status["sessions"][0]["resumable"] and status["sessions"][0]["evaluated"] == 1

    proc = _run([*CLI, "resume", str(run_dir), "--json"], tmp_path, **no_retime)
    _check_finished(run_dir, proc, budget=2, retimed_best=False)
    # The completed evaluation was not redone; the one in flight was redone once, and says so.
    first = json.loads((run_dir / "reports" / f"{reports[0]}.json").read_text())
    assert "interrupted_attempts" not in first.get("evidence", {})
    redone = [json.loads(p.read_text()) for p in (run_dir / "reports").glob("*.json") if p.stem != reports[0]]
    assert sum(1 for r in redone if r.get("evidence", {}).get("interrupted_attempts") == 1) == 1
    lineage = {n["node_id"]: n for n in json.loads((run_dir / "lineage.json").read_text())["nodes"]}
    assert sorted(n["interrupted_evaluations"] for n in lineage.values()) == [0, 1]
    assert lineage[reports[0]]["interrupted_evaluations"] == 0

    again = _run([*CLI, "resume", str(run_dir), "--json"], tmp_path)
    assert again.returncode == 0
    assert json.loads(again.stdout)["resumed"] is False  # nothing to resume


@pytest.mark.slow
@pytest.mark.parametrize(("point", "n"), [("proposal", 2), ("retime", 1), ("outbox", 2)])
def test_resume_after_sigkill_at(tmp_path: Path, point: str, n: int) -> None:
    run_dir = _killed(point, n, tmp_path)
    proc = _run([*CLI, "resume", str(run_dir), "--json"], tmp_path)
    _check_finished(run_dir, proc, budget=3)


@pytest.mark.slow
def test_resume_with_a_larger_budget(tmp_path: Path) -> None:
    run_dir = _killed("evaluation", 2, tmp_path, budget=2)
    proc = _run([*CLI, "resume", str(run_dir), "--budget", "3", "--json"], tmp_path)
    out = _check_finished(run_dir, proc, budget=3)
    assert out["budget"] == 3


def test_resume_refuses_what_it_cannot_resume(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = _run([*CLI, "resume", str(tmp_path / "empty")], tmp_path)
    assert proc.returncode == 2 and "not a run folder" in proc.stderr

    # A run folder driven by a live process: refused, exit 3, nothing touched.
    run_dir = tmp_path / "busy"
    run_dir.mkdir()
    (run_dir / "session.json").write_text(json.dumps({"session_id": "s1", "spec": "x.py", "spec_name": "x",
                                                      "budget": 2}))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (run_dir / ".lock").write_text(str(sleeper.pid))
        proc = _run([*CLI, "resume", str(run_dir)], tmp_path)
        assert proc.returncode == 3 and f"pid {sleeper.pid}" in proc.stderr
        shown = json.loads(_run([*CLI, "sessions", "show", str(run_dir), "--json"], tmp_path).stdout)
        assert shown["status"] == "running" and shown["pid"] == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()
    # Its process died: the lock is stale, the session is resumable (but this one has no bus).
    shown = json.loads(_run([*CLI, "sessions", "show", str(run_dir), "--json"], tmp_path).stdout)
    assert shown["status"] == "stopped" and shown["resumable"]
    proc = _run([*CLI, "resume", str(run_dir)], tmp_path)
    assert proc.returncode == 2 and "no bus state" in proc.stderr
    assert not (run_dir / ".lock").exists()


def test_sessions_cancel_a_running_optimize(tmp_path: Path) -> None:
    """``sessions cancel RUN_DIR`` stops another process's session the way Ctrl-C does."""
    env = _env()
    proc = subprocess.Popen([*CLI, "optimize", str(SPEC), "--budget", "50", "--out", "run", "--json"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    run_dir = tmp_path / "run"
    try:
        deadline = time.monotonic() + 180
        while not list((run_dir / "reports").glob("*.json")) and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.5)
        listed = json.loads(_run([*CLI, "sessions", "list", "--root", str(tmp_path), "--json"], tmp_path).stdout)
        assert [s["status"] for s in listed["sessions"]] == ["running"]
        cancel = _run([*CLI, "sessions", "cancel", str(run_dir), "--json"], tmp_path)
        assert cancel.returncode == 0, cancel.stderr
        info = json.loads(cancel.stdout)
        assert info["cancel_requested"] and info["signalled_pid"] == proc.pid
        assert info["status"] == "cancelled"
        out, _err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM
        assert json.loads(out)["status"] == "cancelled"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.slow
def test_sessions_cancel_a_stopped_session(tmp_path: Path) -> None:
    """A killed session is cancelled on its own bus: it ends as cancelled, nothing more judged."""
    run_dir = _killed("evaluation", 2, tmp_path, budget=3)
    cancel = _run([*CLI, "sessions", "cancel", str(run_dir), "--json"], tmp_path)
    assert cancel.returncode == 0, cancel.stderr[-3000:]
    info = json.loads(cancel.stdout)
    assert info["cancel_requested"] and info["status"] == "cancelled" and not info["resumable"]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "SESSION_STATUS_CANCELLED" and summary["evaluated"] <= 2
    again = _run([*CLI, "resume", str(run_dir), "--json"], tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "cancelled"
