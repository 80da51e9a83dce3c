"""`kernelevolve up` / `down`: a local multi-process cluster on loopback, driven by the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import grpc
import pytest

from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc
from tests.conftest import EXAMPLES
from tests.gateway.test_metrics import value

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]  # ~40 s on 2 cores


def _cli(*args: str, env: dict[str, str], timeout: float = 400) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ke_cli.main", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def _process_groups_alive(pgids: set[int]) -> list[str]:
    """Processes (ours or children we spawned) still in one of ``pgids``."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[2]) in pgids:
            alive.append(stat.parent.name)
    return alive


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as resp:  # noqa: S310 (loopback)
        return resp.read().decode()


def _anonymous_call(name: str, target: str) -> grpc.StatusCode:
    with grpc.insecure_channel(target) as channel:
        try:
            if name == "gateway":
                sgrpc.GatewayStub(channel).GetSession(spb.SessionRef(session_id="x"), timeout=30)
            elif name.startswith("evaluator"):
                sgrpc.EvaluatorStub(channel).ValidateSpec(spb.EvaluateRequest().spec, timeout=30)
            else:
                sgrpc.SearchStub(channel).GetTree(spb.SessionRef(session_id="x"), timeout=30)
        except grpc.RpcError as exc:
            return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_up_optimize_refuse_down(tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = dict(os.environ, KE_CLUSTER_STATE_DIR=str(state), KE_KNOWLEDGE_EMBEDDER="hash",
               KE_EVALUATOR_CORRECTNESS_TRIALS="2", KE_CLIENT_TOKEN="")
    up = _cli("up", "--evaluators", "2", "--json", env=env)
    assert up.returncode == 0, up.stderr
    info = json.loads(up.stdout)
    procs = info["processes"]
    try:
        gateway = info["gateway"]
        assert gateway.startswith("127.0.0.1:")
        assert {"nats", "gateway", "search", "synthesizer", "knowledge", "evaluator-0", "evaluator-1"} == set(procs)
        token = (state / "token").read_text().strip()
        assert len(token) >= 32 and (state / "token").stat().st_mode & 0o077 == 0
        # A second `up` while one runs is refused.
        again = _cli("up", env=env, timeout=60)
        assert again.returncode == 1 and "already running" in again.stderr

        # Unauthenticated calls are refused, on the gateway and on an internal service alike;
        # every gRPC port listens on loopback.
        for name in ("gateway", "evaluator-0", "search"):
            target = procs[name]["grpc"]
            assert target.startswith("127.0.0.1:")
            assert _anonymous_call(name, target) == grpc.StatusCode.UNAUTHENTICATED, name
        with grpc.insecure_channel(gateway) as channel:
            with pytest.raises(grpc.RpcError) as wrong:
                sgrpc.GatewayStub(channel).GetSession(spb.SessionRef(session_id="x"),
                                                      metadata=bearer_metadata("not-the-token"), timeout=30)
            assert wrong.value.code() == grpc.StatusCode.UNAUTHENTICATED
        # The CLI on this machine finds the cluster's token by itself.
        out = tmp_path / "run"
        run = _cli("optimize", str(EXAMPLES / "row_sum.py"), "--budget", "2", "--gateway", gateway,
                   "--out", str(out), "--json", env=env)
        assert run.returncode == 0, run.stderr
        summary = json.loads(run.stdout)
        assert summary["evaluated"] == 2 and summary["best"]["status"] == "correct"
        assert (out / "best_kernel.py").is_file()
        # Without the state folder there is no token: refused, exit 1, nothing left behind.
        stranger = _cli("optimize", str(EXAMPLES / "row_sum.py"), "--budget", "2", "--gateway", gateway,
                        "--out", str(tmp_path / "refused"),
                        env=dict(env, KE_CLUSTER_STATE_DIR=str(tmp_path / "elsewhere")), timeout=120)
        assert stranger.returncode == 1 and "missing bearer token" in stranger.stderr
        assert not (tmp_path / "refused").exists()

        # Metrics endpoints of the gateway and the evaluators.
        gw_metrics = _scrape(procs["gateway"]["metrics"])
        assert value(gw_metrics, "kernelevolve_sessions_started_total") == 1
        assert value(gw_metrics, "kernelevolve_grpc_requests_total", method="GetSession",
                     code="UNAUTHENTICATED") >= 2
        judged = 0.0
        for name in ("evaluator-0", "evaluator-1"):
            text = _scrape(procs[name]["metrics"])
            judged += value(text, "kernelevolve_evaluations_total", hardware="cpu", verdict="correct")
            judged += value(text, "kernelevolve_evaluations_total", hardware="cpu", verdict="incorrect")
        assert judged >= 2  # two candidates, plus the finalist's re-timing
    finally:
        down = _cli("down", "--json", env=env, timeout=120)
    assert down.returncode == 0, down.stderr
    assert set(json.loads(down.stdout)["stopped"]) == set(procs)
    assert _process_groups_alive({p["pid"] for p in procs.values()}) == []
    assert not (state / "token").exists() and not (state / "cluster.json").exists()
    assert json.loads(_cli("down", "--json", env=env, timeout=60).stdout)["stopped"] == []
