"""Distributed mode: the five services as separate processes (their console entrypoints)
against one nats-server and a real S3 server (SeaweedFS), driven through the gateway."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from ke_cli.client import KernelEvolveClient
from kernelevolve.bus.nats_server import NatsServer
from kernelevolve.spec import load_spec_file
from kernelevolve.store import S3Store
from kernelevolve.v1 import common_pb2 as pb
from tests.adapters.seaweed import run_seaweedfs
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

SERVICES = ("evaluator", "knowledge", "synthesizer", "search", "gateway")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _health(port: int, service: str) -> str:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        resp = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=60, wait_for_ready=True)
    return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[dict[str, object]]:
    with ExitStack() as stack:
        nats_server = stack.enter_context(NatsServer(tmp_path / "nats"))
        s3 = stack.enter_context(run_seaweedfs(tmp_path / "s3", bucket="kernelevolve"))
        ports = {svc: _free_port() for svc in SERVICES}
        env = dict(
            os.environ,
            KE_BUS_URL=nats_server.url,
            KE_STORE_KIND="s3",
            KE_STORE_ENDPOINT=s3.endpoint,
            KE_STORE_BUCKET=s3.bucket,
            KE_STORE_ACCESS_KEY=s3.access_key,
            KE_STORE_SECRET_KEY=s3.secret_key,
            KE_KNOWLEDGE_PATH=str(tmp_path / "qdrant"),
            KE_KNOWLEDGE_EMBEDDER="hash",
            KE_EVALUATOR_CORRECTNESS_TRIALS="2",
            KE_EVALUATOR_HARDWARE_KIND="cpu",
            KE_GRPC_EVALUATOR_TARGET=f"127.0.0.1:{ports['evaluator']}",
            KE_LOG_FORMAT="json",
            **{f"KE_GRPC_{svc.upper()}_PORT": str(port) for svc, port in ports.items()},
        )
        procs: dict[str, subprocess.Popen[bytes]] = {}
        logs = tmp_path / "logs"
        logs.mkdir()
        for svc in SERVICES:
            log_file = stack.enter_context(open(logs / f"{svc}.log", "wb"))
            procs[svc] = subprocess.Popen([sys.executable, "-m", f"ke_{svc}"], env=env, stdout=log_file,
                                          stderr=subprocess.STDOUT, start_new_session=True)

        def stop_all() -> None:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for _svc, p in procs.items():
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()

        stack.callback(stop_all)
        yield {"ports": ports, "procs": procs, "s3": s3, "logs": logs}


async def test_five_processes_produce_a_verified_kernel(cluster: dict[str, object]) -> None:
    ports = cluster["ports"]
    procs = cluster["procs"]
    async with KernelEvolveClient(f"127.0.0.1:{ports['gateway']}") as client:  # type: ignore[index]
        await client.wait_ready(timeout_s=120)
        for svc in SERVICES:  # every service answers the standard gRPC health check
            assert await _health(ports[svc], f"kernelevolve.v1.{svc.capitalize()}") == "SERVING"  # type: ignore[index]
        spec = load_spec_file(EXAMPLES / "silu_clamp_mul.py")
        session = await client.start_session(spec, budget=3, max_inflight=2)
        events = [env.WhichOneof("payload") async for env in client.watch(session.session_id)]
        final = await client.get_session(session.session_id)
        assert final.status == pb.SESSION_STATUS_COMPLETED, events
        assert events.count("candidate_generated") == 3 and events.count("evaluation_completed") == 3
        best = await client.get_candidate(session.session_id, final.best_candidate_id)
        assert best.node.status == pb.EVALUATION_STATUS_CORRECT
        assert json.loads(best.report_json)["status"] == "correct"
        # The gateway serves the session's HTML report, drawn from the S3 artifacts.
        html = await client.get_report(session.session_id)
        assert len(re.findall(r'<g class="node[ "]', html)) == 3 and 'id="curve-candidates"' in html
    # Artifacts live in the S3 bucket under the session's prefix.
    s3 = cluster["s3"]
    store = S3Store(s3.endpoint, s3.bucket, s3.access_key, s3.secret_key)  # type: ignore[attr-defined]
    keys = await store.list(f"sessions/{session.session_id}/")
    await store.close()
    names = {k.split("/", 2)[2] for k in keys}
    assert {"spec.py", "lineage.json", "best_kernel.py", "summary.json"} <= names
    assert sum(n.startswith("candidates/") for n in names) == 3
    assert sum(n.startswith("reports/") for n in names) == 3
    # The CLI against the running gateway: same flow, run folder exported through the API.
    out_dir = cluster["logs"].parent / "cli-run"  # type: ignore[attr-defined]
    proc = subprocess.run([sys.executable, "-m", "ke_cli.main", "optimize", str(EXAMPLES / "row_sum.py"),
                           "--budget", "2", "--gateway", f"127.0.0.1:{ports['gateway']}",  # type: ignore[index]
                           "--out", str(out_dir), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["best"]["status"] == "correct" and summary["evaluated"] == 2
    assert (out_dir / "best_kernel.py").is_file() and (out_dir / "lineage.json").is_file()
    assert len(list((out_dir / "reports").glob("*.json"))) == 2
    assert summary["report"] == str(out_dir / "report.html") and (out_dir / "summary.json").is_file()
    for svc, p in procs.items():  # type: ignore[union-attr]
        assert p.poll() is None, f"{svc} died"
    # Graceful stop: SIGTERM ends every service with exit code 0.
    for p in procs.values():  # type: ignore[union-attr]
        p.send_signal(signal.SIGTERM)
    for svc, p in procs.items():  # type: ignore[union-attr]
        assert p.wait(timeout=30) == 0, (cluster["logs"] / f"{svc}.log").read_text()[-2000:]  # type: ignore[operator]
