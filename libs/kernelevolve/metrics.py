"""Prometheus metrics of every service, and the HTTP endpoint that serves them.

Metrics live in one registry of this module (``REGISTRY``) rather than the client
library's global one, so that the embedded stack (five services in one process) and
tests see one consistent set. Defining them creates no connection; the endpoint starts
only in ``start_metrics_server``, called by a standalone service's entrypoint.

| metric | type | labels | meaning |
|---|---|---|---|
| ``kernelevolve_grpc_requests_total`` | counter | service, method, code | calls answered, refused ones included |
| ``kernelevolve_grpc_request_seconds`` | histogram | service, method | time to answer a unary call |
| ``kernelevolve_sessions_started_total`` | counter | | sessions accepted by the gateway |
| ``kernelevolve_candidates_generated_total`` | counter | hardware | candidates published (``rate()``: per second) |
| ``kernelevolve_evaluations_total`` | counter | hardware, verdict | verdicts given (correct, incorrect, ...) |
| ``kernelevolve_evaluation_seconds`` | histogram | hardware | time to judge one candidate |
| ``kernelevolve_queue_lag_seconds`` | histogram | hardware | time a candidate waited in its queue before judging |
| ``kernelevolve_llm_tokens_total`` | counter | model, kind | LLM tokens spent (kind: prompt or completion) |

The pending-message count of each evaluator queue is NATS's own (its monitoring port,
``/jsz?consumers=true``), which is also what KEDA scales on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from prometheus_client import (
    CollectorRegistry,
    Counter,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    start_http_server,
)

from kernelevolve.grpc_wrap import Stream, Unary, rewrap, unwrapped

REGISTRY = CollectorRegistry()
ProcessCollector(registry=REGISTRY)  # resident memory, CPU seconds, open fds
PlatformCollector(registry=REGISTRY)
GCCollector(registry=REGISTRY)

GRPC_REQUESTS = Counter("kernelevolve_grpc_requests", "gRPC calls answered, by final status code",
                        ["service", "method", "code"], registry=REGISTRY)
GRPC_SECONDS = Histogram("kernelevolve_grpc_request_seconds", "Time to answer a unary gRPC call",
                         ["service", "method"], registry=REGISTRY,
                         buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
SESSIONS_STARTED = Counter("kernelevolve_sessions_started", "Sessions accepted by the gateway", registry=REGISTRY)
CANDIDATES_GENERATED = Counter("kernelevolve_candidates_generated", "Candidates published for evaluation",
                               ["hardware"], registry=REGISTRY)
EVALUATIONS = Counter("kernelevolve_evaluations", "Verdicts given, by verdict", ["hardware", "verdict"],
                      registry=REGISTRY)
# Judging takes from ~1 s (a GPU kernel) to minutes (the CPU interpreter, compile timeouts).
EVALUATION_SECONDS = Histogram("kernelevolve_evaluation_seconds", "Time to judge one candidate", ["hardware"],
                               registry=REGISTRY, buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600))
QUEUE_LAG_SECONDS = Histogram("kernelevolve_queue_lag_seconds",
                              "Time from CandidateGenerated to the start of its judging", ["hardware"],
                              registry=REGISTRY, buckets=(0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 120, 300, 600, 1800))
LLM_TOKENS = Counter("kernelevolve_llm_tokens", "LLM tokens spent by the synthesizer", ["model", "kind"],
                     registry=REGISTRY)


def record_llm_usage(model: str, prompt_tokens: int, completion_tokens: int) -> None:
    """Called by an LLM-backed synthesizer after each completion (the offline one spends none)."""
    LLM_TOKENS.labels(model=model, kind="prompt").inc(max(0, prompt_tokens))
    LLM_TOKENS.labels(model=model, kind="completion").inc(max(0, completion_tokens))


def start_metrics_server(host: str, port: int) -> tuple[int, Callable[[], None]]:
    """Serve ``/metrics`` on ``host:port`` (0 = a free port) in a background thread.

    Returns the bound port and a function that stops the server.
    """
    server, thread = start_http_server(port, addr=host, registry=REGISTRY)

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    return int(server.server_port), stop


def _split(method: str) -> tuple[str, str]:
    """``/kernelevolve.v1.Gateway/StartSession`` -> (``kernelevolve.v1.Gateway``, ``StartSession``)."""
    _, service, name = method.split("/", 2) if method.count("/") >= 2 else ("", "", method)
    return service, name


def _code(context: grpc.aio.ServicerContext, failed: bool) -> str:
    code = context.code()
    if isinstance(code, grpc.StatusCode):
        return code.name
    if isinstance(code, int):  # grpc.aio reports the numeric code of an abort
        for status in grpc.StatusCode:
            if status.value[0] == code:
                return status.name
    return "UNKNOWN" if failed else "OK"


class MetricsInterceptor(grpc.aio.ServerInterceptor):
    """Outermost interceptor: counts every call by final code, refused ones included."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        service, method = _split(handler_call_details.method)

        def unary(inner: Unary) -> Unary:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> Any:
                start = time.perf_counter()
                failed = True
                try:
                    result = await inner(request, context)
                    failed = False
                    return result
                finally:
                    GRPC_REQUESTS.labels(service, method, _code(context, failed)).inc()
                    GRPC_SECONDS.labels(service, method).observe(time.perf_counter() - start)

            return call

        def stream(inner: Stream) -> Stream:
            async def call(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                failed = True
                try:
                    async for item in inner(request, context):
                        yield item
                    failed = False
                finally:
                    GRPC_REQUESTS.labels(service, method, _code(context, failed)).inc()

            return call

        return rewrap(handler, unary, stream, unwrapped)
