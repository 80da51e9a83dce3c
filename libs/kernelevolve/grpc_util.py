"""gRPC plumbing shared by every service: the one status interceptor, health, servers.

Servicers raise ``kernelevolve.errors`` exceptions; ``ErrorInterceptor`` maps them to
status codes in one place, so no servicer calls ``context.abort`` for domain errors.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer  # the grpc.aio flavour (health.aio re-exports it)

from kernelevolve import errors
from kernelevolve.grpc_guard import GuardInterceptor, RateLimiter, TokenAuth
from kernelevolve.grpc_wrap import Stream, Unary, rewrap, unwrapped

if TYPE_CHECKING:
    from kernelevolve.config import Settings

log = logging.getLogger(__name__)

_CODES: tuple[tuple[type[errors.KernelEvolveError], grpc.StatusCode], ...] = (
    (errors.InvalidSpecError, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (errors.NotFoundError, grpc.StatusCode.NOT_FOUND),
    (errors.ConflictError, grpc.StatusCode.ALREADY_EXISTS),
    (errors.ConfigError, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.NothingToComputeError, grpc.StatusCode.FAILED_PRECONDITION),
    (errors.ResourceLimitError, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (errors.DependencyTimeout, grpc.StatusCode.DEADLINE_EXCEEDED),
    (errors.RetryableError, grpc.StatusCode.UNAVAILABLE),
    (errors.KernelEvolveError, grpc.StatusCode.INTERNAL),
)


def status_for(exc: errors.KernelEvolveError) -> grpc.StatusCode:
    for cls, code in _CODES:
        if isinstance(exc, cls):
            return code
    return grpc.StatusCode.INTERNAL


# Trailing metadata naming the error class: RESOURCE_EXHAUSTED is also a rate limit
# (grpc_guard), which a client retries; a ResourceLimitError must not be.
ERROR_TYPE_KEY = "ke-error-type"


def error_type_of(exc: grpc.aio.AioRpcError | grpc.RpcError) -> str:
    """The error class name the server sent with a status (empty when none)."""
    try:
        trailing = exc.trailing_metadata() or ()  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - a status without metadata
        return ""
    for key, value in trailing:
        if key == ERROR_TYPE_KEY:
            return str(value)
    return ""


def error_from_status(code: grpc.StatusCode, details: str, error_type: str = "") -> errors.KernelEvolveError:
    """Client side: turn a status back into our hierarchy (inverse of ``status_for``);
    ``error_type``: the class name the server sent (``error_type_of``)."""
    if error_type == errors.ResourceLimitError.__name__:
        return errors.ResourceLimitError(details)
    if error_type == errors.NothingToComputeError.__name__:
        return errors.NothingToComputeError(details)
    mapping = {
        grpc.StatusCode.INVALID_ARGUMENT: errors.InvalidArgumentError,
        grpc.StatusCode.NOT_FOUND: errors.NotFoundError,
        grpc.StatusCode.ALREADY_EXISTS: errors.ConflictError,
        grpc.StatusCode.FAILED_PRECONDITION: errors.ConfigError,
        grpc.StatusCode.DEADLINE_EXCEEDED: errors.DependencyTimeout,
        grpc.StatusCode.UNAVAILABLE: errors.RetryableError,
    }
    return mapping.get(code, errors.KernelEvolveError)(details)


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        method = handler_call_details.method

        def unary(inner: Unary) -> Unary:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                try:
                    return await inner(request, context)
                except errors.KernelEvolveError as exc:
                    await _abort(context, method, exc)

            return call

        def stream(inner: Stream) -> Stream:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                try:
                    async for item in inner(request, context):
                        yield item
                except errors.KernelEvolveError as exc:
                    await _abort(context, method, exc)

            return call

        return rewrap(handler, unary, stream, unwrapped)


async def _abort(context: grpc.aio.ServicerContext, method: str, exc: errors.KernelEvolveError) -> None:
    code = status_for(exc)
    log.info("rpc failed", extra={"method": method, "code": code.name, "error": str(exc)})
    await context.abort(code, str(exc), trailing_metadata=((ERROR_TYPE_KEY, type(exc).__name__),))


@dataclass
class RunningServer:
    server: grpc.aio.Server
    port: int
    health: HealthServicer

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def stop(self, grace_s: float = 2.0) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace_s)


@dataclass(frozen=True)
class ServerOptions:
    """How a server admits calls. The defaults admit everyone (embedded stack, tests)."""

    tokens: tuple[str, ...] = ()
    # Per-client token bucket; 0 = no limit.
    rate_per_s: float = 0.0
    rate_burst: int = 0
    # PEM server certificate chain and key; empty = plaintext.
    tls_cert: bytes = b""
    tls_key: bytes = b""
    max_message_bytes: int = 8 * 1024 * 1024


def server_options(settings: Settings, *, public: bool = False) -> ServerOptions:
    """Options of one service's server from settings; ``public`` (the gateway) adds TLS and
    rate limits, every server gets authentication and the size limit."""
    opts = ServerOptions(tokens=settings.auth.token_list, max_message_bytes=settings.grpc.max_message_bytes)
    if not public:
        return opts
    gw = settings.gateway
    cert = key = b""
    if bool(gw.tls_cert_file) != bool(gw.tls_key_file):
        raise errors.ConfigError("gateway TLS needs both tls_cert_file and tls_key_file")
    if gw.tls_cert_file:
        try:
            cert, key = Path(gw.tls_cert_file).read_bytes(), Path(gw.tls_key_file).read_bytes()
        except OSError as exc:
            raise errors.ConfigError(f"cannot read the gateway's TLS certificate or key: {exc}") from exc
    return ServerOptions(tokens=opts.tokens, rate_per_s=gw.rate_per_s, rate_burst=gw.rate_burst,
                         tls_cert=cert, tls_key=key, max_message_bytes=opts.max_message_bytes)


async def start_server(
    host: str,
    port: int,
    register: Iterable[Callable[[grpc.aio.Server], None]],
    service_names: Iterable[str],
    options: ServerOptions | None = None,
) -> RunningServer:
    """Start a grpc.aio server with the guard (tokens, rate limit), the error interceptor
    and the standard health service.

    ``port=0`` binds a free port; the bound port is returned.
    """
    from kernelevolve.metrics import MetricsInterceptor

    opts = options or ServerOptions()
    auth = TokenAuth(opts.tokens) if opts.tokens else None
    limiter = RateLimiter(opts.rate_per_s, max(1, opts.rate_burst)) if opts.rate_per_s > 0 else None
    # Order: count every call (refused ones too), then admit, then map domain errors.
    interceptors: list[grpc.aio.ServerInterceptor] = [MetricsInterceptor()]
    if auth is not None or limiter is not None:
        interceptors.append(GuardInterceptor(auth, limiter))
    interceptors.append(ErrorInterceptor())
    server = grpc.aio.server(interceptors=interceptors, options=[
        ("grpc.max_receive_message_length", opts.max_message_bytes),
    ])
    for reg in register:
        reg(server)
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if opts.tls_cert:
        creds = grpc.ssl_server_credentials([(opts.tls_key, opts.tls_cert)])
        bound = server.add_secure_port(f"{host}:{port}", creds)
    else:
        bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise errors.ConfigError(f"cannot bind gRPC server to {host}:{port}")
    await server.start()
    for name in ["", *service_names]:
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, bound, health_servicer)
