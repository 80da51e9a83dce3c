"""Who may call a gRPC server, and how often: bearer tokens and per-client rate limits.

``GuardInterceptor`` runs before the servicer on every call except the standard health
service (Kubernetes' gRPC probes cannot send credentials):

* **authentication**: ``authorization: Bearer <token>`` metadata, compared in constant
  time (``hmac.compare_digest``) against every accepted token; none or a wrong one
  aborts with UNAUTHENTICATED. The attempt is logged with method, peer and reason,
  never with the token itself.
* **rate limit**: a token bucket per client (the token's position in the accepted list,
  or the peer's host when no authentication is configured); an empty bucket aborts
  with RESOURCE_EXHAUSTED.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import grpc

from kernelevolve.grpc_wrap import Stream, Unary, rewrap

log = logging.getLogger(__name__)

AUTH_HEADER = "authorization"
_HEALTH_PREFIX = "/grpc.health.v1.Health/"


def bearer_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """Call metadata carrying ``token``; empty when there is no token to send."""
    return ((AUTH_HEADER, f"Bearer {token}"),) if token else ()


class TokenAuth:
    """The accepted tokens; ``identify`` answers which one was presented, or None."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self._tokens = [t.encode() for t in tokens if t]
        if not self._tokens:
            raise ValueError("TokenAuth needs at least one token")

    def identify(self, header: str | None) -> int | None:
        if not header or not header.startswith("Bearer "):
            return None
        presented = header[len("Bearer "):].strip().encode()
        found: int | None = None
        # Compare against every token, without stopping early, so that timing does not
        # tell which (or whether any) token shares a prefix with the presented one.
        for i, token in enumerate(self._tokens):
            if hmac.compare_digest(presented, token) and found is None:
                found = i
        return found


class RateLimiter:
    """Token buckets keyed by client: ``rate`` calls per second sustained, ``burst`` at once.

    The clock is injected so that tests do not sleep. At most ``max_clients`` buckets are
    kept (least recently used dropped), so a stream of distinct peers cannot grow memory.
    """

    def __init__(self, rate_per_s: float, burst: int, clock: Callable[[], float] = time.monotonic,
                 max_clients: int = 10_000) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError("rate_per_s must be > 0 and burst >= 1")
        self._rate = rate_per_s
        self._burst = float(burst)
        self._clock = clock
        self._max = max_clients
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def allow(self, client: str) -> bool:
        now = self._clock()
        tokens, last = self._buckets.pop(client, (self._burst, now))
        tokens = min(self._burst, tokens + (now - last) * self._rate)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[client] = (tokens, now)
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        return allowed


def peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5123`` -> ``ipv4:127.0.0.1``; the ephemeral port is not the client."""
    head, _, tail = peer.rpartition(":")
    return head if head and tail.isdigit() else peer


@dataclass
class _Verdict:
    code: grpc.StatusCode | None
    message: str = ""


class GuardInterceptor(grpc.aio.ServerInterceptor):
    def __init__(self, auth: TokenAuth | None, limiter: RateLimiter | None) -> None:
        self._auth = auth
        self._limiter = limiter

    def _check(self, method: str, metadata: Any, context: grpc.aio.ServicerContext) -> _Verdict:
        client = ""
        if self._auth is not None:
            header = None
            for key, value in metadata or ():
                if key == AUTH_HEADER:
                    header = value if isinstance(value, str) else value.decode(errors="replace")
            who = self._auth.identify(header)
            if who is None:
                reason = "missing" if header is None else "wrong"
                log.warning("unauthenticated call refused",
                            extra={"method": method, "peer": context.peer(), "credentials": reason})
                return _Verdict(grpc.StatusCode.UNAUTHENTICATED,
                                "missing bearer token" if header is None else "invalid bearer token")
            client = f"token-{who}"
        if self._limiter is not None:
            client = client or peer_host(context.peer() or "")
            if not self._limiter.allow(client):
                log.info("call rate-limited", extra={"method": method, "client": client})
                return _Verdict(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate limit exceeded; retry later")
        return _Verdict(None)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(_HEALTH_PREFIX):
            return handler
        metadata = handler_call_details.invocation_metadata

        async def admit(context: grpc.aio.ServicerContext) -> None:
            verdict = self._check(method, metadata, context)
            if verdict.code is not None:
                await context.abort(verdict.code, verdict.message)

        def unary(inner: Unary) -> Unary:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                await admit(context)
                return await inner(request, context)

            return call

        def stream(inner: Stream) -> Stream:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                await admit(context)
                async for item in inner(request, context):
                    yield item

            return call

        def refuse(other: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
            # Client- and bidi-streaming calls: none in our API; refuse rather than let them bypass the guard.
            raise NotImplementedError(f"{method}: streaming requests are not guarded")

        return rewrap(handler, unary, stream, refuse)
