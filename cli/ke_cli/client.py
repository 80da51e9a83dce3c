"""Python API: a thin async client of the gateway's gRPC API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import grpc

from kernelevolve.artifacts import lineage_document
from kernelevolve.errors import RetryableError
from kernelevolve.grpc_util import error_from_status
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc


def _mapped(exc: grpc.aio.AioRpcError) -> Exception:
    return error_from_status(exc.code(), exc.details() or str(exc.code()))


class KernelEvolveClient:
    """``async with KernelEvolveClient("127.0.0.1:50051") as c: s = await c.start_session(spec)``."""

    def __init__(self, target: str) -> None:
        self.target = target
        # Reports of large sessions (every candidate's source and diff) exceed gRPC's 4 MiB default.
        self._channel = grpc.aio.insecure_channel(target, options=[("grpc.max_receive_message_length", 64 << 20)])
        self._stub = sgrpc.GatewayStub(self._channel)

    async def __aenter__(self) -> KernelEvolveClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    async def wait_ready(self, timeout_s: float = 10.0) -> None:
        try:
            from grpc_health.v1 import health_pb2, health_pb2_grpc

            stub = health_pb2_grpc.HealthStub(self._channel)
            await stub.Check(health_pb2.HealthCheckRequest(service="kernelevolve.v1.Gateway"),
                             timeout=timeout_s, wait_for_ready=True)
        except grpc.aio.AioRpcError as exc:
            raise RetryableError(f"gateway at {self.target} not ready: {exc.details()}") from exc

    async def start_session(self, spec: pb.OperatorSpec, budget: int = 0, *, strategy: str = "",
                            hardware_kind: str = "", session_id: str = "", max_inflight: int = 0) -> pb.Session:
        req = spb.StartSessionRequest(spec=spec, budget=budget, strategy=strategy, hardware_kind=hardware_kind,
                                      session_id=session_id, max_inflight=max_inflight)
        try:
            return (await self._stub.StartSession(req)).session
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def watch(self, session_id: str) -> AsyncIterator[ev.Envelope]:
        try:
            async for env in self._stub.WatchSession(spb.WatchSessionRequest(session_id=session_id,
                                                                             from_start=True)):
                yield env
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def get_session(self, session_id: str) -> pb.Session:
        try:
            return await self._stub.GetSession(spb.SessionRef(session_id=session_id))
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def list_candidates(self, session_id: str) -> list[pb.Node]:
        try:
            return list((await self._stub.ListCandidates(spb.SessionRef(session_id=session_id))).nodes)
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def get_candidate(self, session_id: str, candidate_id: str) -> spb.GetCandidateResponse:
        try:
            return await self._stub.GetCandidate(spb.CandidateRef(session_id=session_id, candidate_id=candidate_id))
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def cancel(self, session_id: str) -> pb.Session:
        try:
            return await self._stub.CancelSession(spb.SessionRef(session_id=session_id))
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def get_report(self, session_id: str) -> str:
        """The session's self-contained HTML report, rendered by the gateway from its artifacts."""
        try:
            return (await self._stub.GetReport(spb.SessionRef(session_id=session_id))).html
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def export(self, session_id: str, out_dir: Path) -> Path:
        """Write a run folder (candidates, reports, lineage, best kernel) from the API alone,
        for sessions whose artifacts live in a remote store."""
        out_dir.mkdir(parents=True, exist_ok=True)
        session = await self.get_session(session_id)
        nodes = await self.list_candidates(session_id)
        (out_dir / "candidates").mkdir(exist_ok=True)
        (out_dir / "reports").mkdir(exist_ok=True)
        (out_dir / "spec.py").write_text(session.spec.source)
        for node in nodes:
            resp = await self.get_candidate(session_id, node.node_id)
            (out_dir / "candidates" / f"{node.node_id}.py").write_text(resp.source)
            if resp.report_json:
                (out_dir / "reports" / f"{node.node_id}.json").write_text(resp.report_json)
            if node.node_id == session.best_candidate_id:
                (out_dir / "best_kernel.py").write_text(resp.source)
        lineage = lineage_document(session_id, session.spec.name, nodes)
        (out_dir / "lineage.json").write_text(json.dumps(lineage, indent=2))
        summary = {"session_id": session_id, "spec": session.spec.name,
                   "status": pb.SessionStatus.Name(session.status), "budget": session.budget,
                   "generated": session.generated, "evaluated": session.evaluated,
                   "best_candidate_id": session.best_candidate_id, "best_speedup": session.best_speedup}
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))  # what report and export read
        return out_dir
