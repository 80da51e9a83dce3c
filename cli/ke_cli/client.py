"""Python API: a thin async client of the gateway's gRPC API."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from kernelevolve.artifacts import lineage_document
from kernelevolve.errors import KernelEvolveError, RetryableError
from kernelevolve.grpc_guard import bearer_metadata
from kernelevolve.grpc_util import error_from_status, error_type_of
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev
from kernelevolve.v1 import services_pb2 as spb
from kernelevolve.v1 import services_pb2_grpc as sgrpc

log = logging.getLogger(__name__)

T = TypeVar("T")


class AuthenticationError(KernelEvolveError):
    """The gateway refused the credentials (UNAUTHENTICATED / PERMISSION_DENIED)."""


class RateLimitedError(RetryableError):
    """The gateway's rate limit for this client is exhausted (RESOURCE_EXHAUSTED)."""


def _mapped(exc: grpc.aio.AioRpcError) -> Exception:
    details = exc.details() or str(exc.code())
    if exc.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return AuthenticationError(f"gateway refused the call: {details} (give a token with --token or "
                                   "KE_CLIENT_TOKEN)")
    error_type = error_type_of(exc)
    if exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and not error_type:
        return RateLimitedError(details)
    return error_from_status(exc.code(), details, error_type)


class KernelEvolveClient:
    """``async with KernelEvolveClient("127.0.0.1:50051") as c: s = await c.start_session(spec)``.

    ``token``: bearer token the gateway expects (empty: none sent). ``tls``: connect over
    TLS, trusting ``ca_cert`` (PEM bytes; None = the system roots).
    """

    def __init__(self, target: str, *, token: str = "", tls: bool = False, ca_cert: bytes | None = None,
                 watch_retries: int = 5, rate_limit_retries: int = 8) -> None:
        self.target = target
        # Reports of large sessions (every candidate's source and diff) exceed gRPC's 4 MiB default.
        options = [("grpc.max_receive_message_length", 64 << 20)]
        if tls:
            self._channel = grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=ca_cert),
                                                    options=options)
        else:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        self._stub = sgrpc.GatewayStub(self._channel)
        self._md = bearer_metadata(token)
        self._watch_retries = watch_retries
        self._rate_retries = rate_limit_retries

    async def _call(self, method: Callable[..., Awaitable[T]], request: Any) -> T:
        """One unary call; a rate-limited one (RESOURCE_EXHAUSTED) is retried with growing
        pauses, so that a long export stays within the gateway's per-client limit."""
        for attempt in range(self._rate_retries + 1):
            try:
                return await method(request, metadata=self._md)
            except grpc.aio.AioRpcError as exc:
                if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or error_type_of(exc) \
                        or attempt == self._rate_retries:
                    raise _mapped(exc) from exc
                await asyncio.sleep(min(5.0, 0.1 * 2 ** attempt))
        raise AssertionError("unreachable")

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
                            hardware_kind: str = "", session_id: str = "", max_inflight: int = 0,
                            seeds: int = 0, time_limit_s: float = 0.0, plateau: int = 0,
                            target_roofline: float = 0.0, baseline: str = "", tune_share: float | None = None,
                            tune_elite: int | None = None, precision: str = "") -> pb.Session:
        """Zero / empty options (``None`` for the tuning stage's, where 0 turns it off) take
        the gateway's defaults (``search.session.*``); ``precision``: the contract
        (``kernelevolve.precision``)."""
        req = spb.StartSessionRequest(spec=spec, budget=budget, strategy=strategy, hardware_kind=hardware_kind,
                                      session_id=session_id, max_inflight=max_inflight, seeds=seeds,
                                      time_limit_s=time_limit_s, plateau=plateau, target_roofline=target_roofline,
                                      baseline=baseline, tune_share=tune_share, tune_elite=tune_elite,
                                      precision=precision)
        return (await self._call(self._stub.StartSession, req)).session

    async def watch(self, session_id: str, after_sequence: int = 0) -> AsyncIterator[ev.Envelope]:
        """The session's events until SessionCompleted. A stream broken by an unavailable
        gateway is resumed after the last event received, so nothing is seen twice."""
        last = after_sequence
        retries = 0
        while True:
            req = spb.WatchSessionRequest(session_id=session_id, from_start=last == 0, after_sequence=last)
            try:
                async for env in self._stub.WatchSession(req, metadata=self._md):
                    last = max(last, env.sequence)
                    retries = 0
                    yield env
                return
            except grpc.aio.AioRpcError as exc:
                # A rate-limited or broken stream is resumed; anything else is the caller's.
                if exc.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED) \
                        or retries >= self._watch_retries:
                    raise _mapped(exc) from exc
                retries += 1
                log.info("watch interrupted; resuming", extra={"session_id": session_id, "after_sequence": last})
                await asyncio.sleep(min(5.0, 0.5 * 2 ** retries))

    async def get_session(self, session_id: str) -> pb.Session:
        return await self._call(self._stub.GetSession, spb.SessionRef(session_id=session_id))

    async def list_candidates(self, session_id: str) -> list[pb.Node]:
        resp = await self._call(self._stub.ListCandidates, spb.SessionRef(session_id=session_id))
        return list(resp.nodes)

    async def get_candidate(self, session_id: str, candidate_id: str) -> spb.GetCandidateResponse:
        ref = spb.CandidateRef(session_id=session_id, candidate_id=candidate_id)
        return await self._call(self._stub.GetCandidate, ref)

    async def cancel(self, session_id: str) -> pb.Session:
        return await self._call(self._stub.CancelSession, spb.SessionRef(session_id=session_id))

    async def resume(self, session_id: str, budget: int = 0) -> pb.Session:
        req = spb.ResumeSessionRequest(session_id=session_id, budget=budget)
        return await self._call(self._stub.ResumeSession, req)

    async def list_sessions(self) -> list[pb.Session]:
        return list((await self._call(self._stub.ListSessions, spb.ListSessionsRequest())).sessions)

    async def get_report(self, session_id: str) -> str:
        """The session's self-contained HTML report, rendered by the gateway from its artifacts."""
        try:
            return (await self._stub.GetReport(spb.SessionRef(session_id=session_id))).html
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def agent_next(self, session_id: str = "", *, agent: str = "", wait_s: float = 0.0) -> spb.AgentRequest:
        """Take the oldest open agent synthesis request (of one session, or any); NotFoundError
        when none opens within ``wait_s``."""
        req = spb.AgentNextRequest(session_id=session_id, agent=agent, wait_s=wait_s)
        try:
            return await self._stub.AgentNext(req, metadata=self._md, timeout=wait_s + 30.0)
        except grpc.aio.AioRpcError as exc:
            raise _mapped(exc) from exc

    async def agent_submit(self, request_id: str, source: str, *, agent: str = "") -> spb.AgentSubmitResponse:
        """Answer an agent request with a whole module defining ModelNew; refused
        (NotFoundError / ConflictError naming why) for an unknown or expired request."""
        req = spb.AgentSubmitRequest(request_id=request_id, source=source, agent=agent)
        return await self._call(self._stub.AgentSubmit, req)

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
                   "best_candidate_id": session.best_candidate_id, "best_speedup": session.best_speedup,
                   "end_reason": session.end_reason}
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=2))  # what report and export read
        return out_dir
