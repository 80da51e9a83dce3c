"""The bus port. Every message is a ``kernelevolve.v1.Envelope``.

Semantics (both adapters pass tests/bus/test_bus_contract.py):
- ``publish`` appends to the durable stream; ``dedup_id`` makes re-publishing the
  same logical event (after a crash and redelivery) a no-op within the dedup window.
- ``consume(filter, durable, handler)`` is a durable work queue: each message goes to
  exactly one of the processes sharing ``durable`` and is acknowledged after the
  handler returns; a handler raising a RetryableError (or any unexpected error) gets
  the message redelivered later; a PermanentError terminates it (logged, not retried)
  and, when the message belongs to a session, publishes ``SessionFailed`` on
  ``<prefix>.<session>.session.failed`` so the session ends instead of waiting forever
  (``failures.py``; durable names start with the consuming service's name).
  Two different durables on the same subject each see every message.
- ``watch(filter)`` replays matching messages from the start of the stream and then
  follows new ones, in order (for the gateway's WatchSession).
- A key-value store with compare-and-set for the search tree and session records.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from kernelevolve.v1.events_pb2 import Envelope

Handler = Callable[[Envelope], Awaitable[None]]


@dataclass(frozen=True)
class KeyValueEntry:
    key: str
    value: bytes
    revision: int


class Subscription(Protocol):
    async def stop(self) -> None: ...


class EventBus(Protocol):
    async def publish(self, subject: str, envelope: Envelope, dedup_id: str | None = None) -> int:
        """Append an envelope; returns its stream sequence."""
        ...

    async def consume(
        self,
        subject_filter: str,
        durable: str,
        handler: Handler,
        *,
        ack_wait_s: float = 30.0,
        max_deliver: int = 5,
        concurrency: int = 1,
    ) -> Subscription: ...

    def watch(self, subject_filter: str) -> AsyncIterator[Envelope]: ...

    async def kv_get(self, key: str) -> KeyValueEntry | None: ...

    async def kv_put(self, key: str, value: bytes) -> int: ...

    async def kv_create(self, key: str, value: bytes) -> int:
        """Create only if absent; ConflictError otherwise."""
        ...

    async def kv_update(self, key: str, value: bytes, revision: int) -> int:
        """Compare-and-set on revision; ConflictError when someone else wrote first."""
        ...

    async def kv_keys(self, prefix: str) -> list[str]: ...

    async def close(self) -> None: ...
