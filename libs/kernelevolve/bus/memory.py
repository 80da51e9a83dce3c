"""In-memory double of the bus port, for unit tests of service logic.

Passes the same contract suite as the JetStream adapter (tests/bus/test_bus_contract.py);
redelivery delays are shortened so tests stay fast.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from kernelevolve.bus.failures import session_failed_event
from kernelevolve.bus.port import Handler, KeyValueEntry
from kernelevolve.bus.subjects import subject_matches
from kernelevolve.errors import ConflictError, PermanentError
from kernelevolve.v1.events_pb2 import Envelope

log = logging.getLogger(__name__)


@dataclass
class _Durable:
    subject_filter: str
    cursor: int = 0  # next stream index to hand out
    redeliver: list[tuple[int, int]] = field(default_factory=list)  # (index, deliveries so far)


class _Loop:
    def __init__(self, tasks: list[asyncio.Task[None]]) -> None:
        self._tasks = tasks

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


class MemoryBus:
    def __init__(self, redeliver_delay_s: float = 0.05) -> None:
        self._log: list[tuple[str, bytes]] = []
        self._dedup: set[str] = set()
        self._durables: dict[str, _Durable] = {}
        self._changed = asyncio.Condition()
        self._kv: dict[str, tuple[bytes, int]] = {}
        self._kv_rev = 0
        self._redeliver_delay_s = redeliver_delay_s
        self._loops: list[_Loop] = []

    async def publish(self, subject: str, envelope: Envelope, dedup_id: str | None = None) -> int:
        if dedup_id is not None:
            if dedup_id in self._dedup:
                return len(self._log)
            self._dedup.add(dedup_id)
        self._log.append((subject, envelope.SerializeToString()))
        async with self._changed:
            self._changed.notify_all()
        return len(self._log)

    async def consume(self, subject_filter: str, durable: str, handler: Handler, *, ack_wait_s: float = 30.0,
                      max_deliver: int = 5, concurrency: int = 1) -> _Loop:
        d = self._durables.setdefault(durable, _Durable(subject_filter))
        # ``concurrency`` handlers at once on one durable, as the JetStream adapter runs them
        tasks = [asyncio.create_task(self._run(durable, d, handler, max_deliver), name=f"memconsume:{durable}:{i}")
                 for i in range(max(1, concurrency))]
        loop = _Loop(tasks)
        self._loops.append(loop)
        return loop

    def _next(self, d: _Durable) -> tuple[int, int] | None:
        if d.redeliver:
            return d.redeliver.pop(0)
        while d.cursor < len(self._log):
            idx = d.cursor
            d.cursor += 1
            if subject_matches(d.subject_filter, self._log[idx][0]):
                return idx, 0
        return None

    async def _run(self, durable: str, d: _Durable, handler: Handler, max_deliver: int) -> None:
        while True:
            item = self._next(d)
            if item is None:
                async with self._changed:
                    await self._changed.wait()
                continue
            idx, deliveries = item
            env = Envelope()
            env.ParseFromString(self._log[idx][1])
            env.sequence = idx + 1
            try:
                await handler(env)
            except asyncio.CancelledError:
                raise
            except PermanentError as exc:
                log.error("handler failed permanently", extra={"error": str(exc), "durable": durable})
                failed = session_failed_event(self._log[idx][0], durable, env, exc)
                if failed is not None:
                    await self.publish(*failed)
            except Exception as exc:
                if deliveries + 1 < max_deliver:
                    log.warning("handler failed; redelivering", extra={"error": repr(exc)})
                    await asyncio.sleep(self._redeliver_delay_s)
                    d.redeliver.append((idx, deliveries + 1))

    async def watch(self, subject_filter: str) -> AsyncIterator[Envelope]:
        idx = 0
        while True:
            while idx < len(self._log):
                subject, data = self._log[idx]
                idx += 1
                if subject_matches(subject_filter, subject):
                    env = Envelope()
                    env.ParseFromString(data)
                    env.sequence = idx
                    yield env
            async with self._changed:
                if idx >= len(self._log):
                    await self._changed.wait()

    async def kv_get(self, key: str) -> KeyValueEntry | None:
        if key not in self._kv:
            return None
        value, rev = self._kv[key]
        return KeyValueEntry(key, value, rev)

    async def kv_put(self, key: str, value: bytes) -> int:
        self._kv_rev += 1
        self._kv[key] = (value, self._kv_rev)
        return self._kv_rev

    async def kv_create(self, key: str, value: bytes) -> int:
        if key in self._kv:
            raise ConflictError(f"{key} already exists")
        return await self.kv_put(key, value)

    async def kv_update(self, key: str, value: bytes, revision: int) -> int:
        current = self._kv.get(key)
        if current is None or current[1] != revision:
            raise ConflictError(f"{key} changed since revision {revision}")
        return await self.kv_put(key, value)

    async def kv_keys(self, prefix: str) -> list[str]:
        return sorted(k for k in self._kv if k.startswith(prefix))

    async def close(self) -> None:
        for loop in self._loops:
            await loop.stop()
        self._loops.clear()
