"""Wrapping a gRPC method handler: what every server interceptor here (errors, auth and
rate limits, metrics) does to a method before it runs.

The project's RPCs are unary-unary and unary-stream; what happens to a handler of
another kind (client or bidirectional streaming) is each caller's explicit choice.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

Unary = Callable[[Any, grpc.aio.ServicerContext], Awaitable[Any]]
Stream = Callable[[Any, grpc.aio.ServicerContext], AsyncIterator[Any]]


def rewrap(handler: grpc.RpcMethodHandler, unary: Callable[[Unary], Unary], stream: Callable[[Stream], Stream],
           other: Callable[[grpc.RpcMethodHandler], grpc.RpcMethodHandler]) -> grpc.RpcMethodHandler:
    """``handler`` with its behaviour wrapped by ``unary`` (unary-unary) or ``stream``
    (unary-stream), serializers kept; a handler of any other kind goes to ``other``."""
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(
            unary(handler.unary_unary), handler.request_deserializer, handler.response_serializer)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(
            stream(handler.unary_stream), handler.request_deserializer, handler.response_serializer)
    return other(handler)


def unwrapped(handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """``other`` for interceptors that leave kinds they do not know as they are."""
    return handler
