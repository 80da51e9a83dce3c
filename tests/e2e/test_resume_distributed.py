"""Distributed mode: ``kernelevolve optimize --gateway`` SIGKILLed together with the search
service and an evaluator mid-session; the services come back, ``kernelevolve resume``
(ResumeSession on the gateway) follows the session to its end, and ``sessions
list/show/cancel --gateway`` see and stop sessions there."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ke_cli.client import KernelEvolveClient
from kernelevolve.spec import load_spec_file
from kernelevolve.v1 import common_pb2 as pb
from tests.conftest import EXAMPLES, REPO_ROOT
from tests.e2e.cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

SPEC = EXAMPLES / "relu_scale_add.py"
CLI = [sys.executable, "-m", "ke_cli.main"]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster").start()
    try:
        yield c
    finally:
        c.stop()


def _env(cluster: Cluster) -> dict[str, str]:
    return dict(os.environ, KE_CLUSTER_STATE_DIR=str(cluster.root / "no-local-cluster"),
                PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p))


def _cli(cluster: Cluster, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], cwd=cwd, env=_env(cluster), capture_output=True, text=True, timeout=400)


async def test_gateway_session_resumes_after_its_cli_search_and_evaluator_are_killed(
        cluster: Cluster, tmp_path: Path) -> None:
    async with KernelEvolveClient(cluster.gateway) as client:
        await client.wait_ready(timeout_s=180)
    run_dir = tmp_path / "run"
    opt = subprocess.Popen([*CLI, "optimize", str(SPEC), "--gateway", cluster.gateway, "--out", str(run_dir),
                            "--budget", "3", "--max-inflight", "1", "--json"], cwd=tmp_path, env=_env(cluster),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "session.json").is_file():
            assert time.monotonic() < deadline and opt.poll() is None
            await asyncio.sleep(0.1)
        sid = json.loads((run_dir / "session.json").read_text())["session_id"]
        await cluster.wait_log("search", "node evaluated", poll_s=0.01, timeout_s=300, session_id=sid)
        os.killpg(opt.pid, signal.SIGKILL)
        cluster.kill("search")
        cluster.kill("evaluator")
    finally:
        if opt.poll() is None:
            opt.kill()
        opt.communicate()
    assert not (run_dir / "summary.json").exists()

    listed = json.loads(_cli(cluster, ["sessions", "list", "--gateway", cluster.gateway, "--json"], tmp_path).stdout)
    assert [(s["session_id"], s["status"]) for s in listed["sessions"]] == [(sid, "running")]
    shown = _cli(cluster, ["sessions", "show", sid, "--gateway", cluster.gateway, "--json"], tmp_path)
    assert json.loads(shown.stdout)["candidates"], shown.stderr

    cluster.restart("search")
    cluster.restart("evaluator")
    proc = _cli(cluster, ["resume", str(run_dir), "--json"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["status"] == "completed" and out["best"]["status"] == "correct"
    assert (run_dir / "summary.json").is_file() and (run_dir / "best_kernel.py").is_file()

    async with KernelEvolveClient(cluster.gateway) as client:
        events = [e async for e in client.watch(sid)]
        final = await client.get_session(sid)
        assert final.resumes == 1 and final.status == pb.SESSION_STATUS_COMPLETED
        evaluated = Counter(e.evaluation_completed.result.candidate_id for e in events
                            if e.WhichOneof("payload") == "evaluation_completed")
        assert set(evaluated.values()) == {1} and len(evaluated) == final.evaluated <= 3

        # Cancel over the gateway: a second session ends as cancelled.
        other = await client.start_session(load_spec_file(SPEC), budget=50, max_inflight=1)
        cancel = _cli(cluster, ["sessions", "cancel", other.session_id, "--gateway", cluster.gateway, "--json"],
                      tmp_path)
        assert cancel.returncode == 0 and json.loads(cancel.stdout)["cancel_requested"], cancel.stderr
        async for _event in client.watch(other.session_id):
            pass
        assert (await client.get_session(other.session_id)).status == pb.SESSION_STATUS_CANCELLED
