"""NATS JetStream adapter of the bus port.

One stream (``KE``, subjects ``ke.>``, limits retention) holds every event, so any
number of durable consumers can read a subject independently; processes that share a
durable name share its messages (a work queue). One KV bucket holds session records
and the search tree, updated with compare-and-set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

import nats
import nats.errors
import nats.js.errors as js_errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api
from nats.js.kv import KeyValue

from kernelevolve.bus.failures import session_failed_event
from kernelevolve.bus.port import Handler, KeyValueEntry
from kernelevolve.config import BusSettings
from kernelevolve.errors import (
    BusUnavailable,
    ConflictError,
    InvalidArgumentError,
    KernelEvolveError,
    PermanentError,
)
from kernelevolve.v1.events_pb2 import Envelope

log = logging.getLogger(__name__)

# Redelivery back-off after a failed handler: quick first retry, then slower.
_NAK_DELAYS_S = (1.0, 5.0, 15.0, 30.0)


class _PullLoop:
    def __init__(self, task: asyncio.Task[None], sub: object) -> None:
        self._task = task
        self._sub = sub

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
        with contextlib.suppress(Exception):
            await self._sub.unsubscribe()  # type: ignore[attr-defined]


class JetStreamBus:
    """Build with ``await JetStreamBus.connect(settings)``; ``close()`` drains."""

    def __init__(self, nc: Client, settings: BusSettings, kv: KeyValue) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._settings = settings
        self._kv = kv
        self._loops: list[_PullLoop] = []

    @classmethod
    async def connect(cls, settings: BusSettings, name: str = "kernelevolve") -> JetStreamBus:
        if not settings.url:
            raise InvalidArgumentError("bus url is empty: set KE_BUS_URL or use the embedded runner")
        try:
            nc = await nats.connect(
                servers=[settings.url],
                name=name,
                connect_timeout=settings.connect_timeout_s,
                max_reconnect_attempts=-1,
                allow_reconnect=True,
            )
        except (TimeoutError, OSError, nats.errors.Error) as exc:
            raise BusUnavailable(f"cannot connect to NATS at {settings.url}: {exc}") from exc
        js = nc.jetstream()
        try:
            await _ensure_stream(js, settings)
            try:
                kv = await js.key_value(settings.kv_bucket)
            except js_errors.BucketNotFoundError:
                kv = await js.create_key_value(bucket=settings.kv_bucket, history=1)
        except (TimeoutError, nats.errors.Error) as exc:
            await nc.close()
            raise BusUnavailable(f"JetStream not available at {settings.url}: {exc}") from exc
        return cls(nc, settings, kv)

    # -- events ---------------------------------------------------------------------

    async def publish(self, subject: str, envelope: Envelope, dedup_id: str | None = None) -> int:
        headers = {"Nats-Msg-Id": dedup_id} if dedup_id else None
        try:
            ack = await self._js.publish(subject, envelope.SerializeToString(), headers=headers, timeout=10)
        except (TimeoutError, nats.errors.Error) as exc:
            raise BusUnavailable(f"publish to {subject} failed: {exc}") from exc
        return int(ack.seq)

    async def consume(
        self,
        subject_filter: str,
        durable: str,
        handler: Handler,
        *,
        ack_wait_s: float | None = None,
        max_deliver: int = 5,
        concurrency: int = 1,
    ) -> _PullLoop:
        if ack_wait_s is None:
            ack_wait_s = self._settings.ack_wait_s
        config = api.ConsumerConfig(
            durable_name=durable,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=ack_wait_s,
            max_deliver=max_deliver,
            filter_subject=subject_filter,
        )
        try:
            sub = await self._js.pull_subscribe(subject_filter, durable=durable, stream=self._settings.stream,
                                                config=config)
        except (TimeoutError, nats.errors.Error) as exc:
            raise BusUnavailable(f"cannot create consumer {durable} on {subject_filter}: {exc}") from exc
        task = asyncio.create_task(self._pull_loop(sub, durable, handler, ack_wait_s, concurrency),
                                   name=f"consume:{durable}")
        loop = _PullLoop(task, sub)
        self._loops.append(loop)
        return loop

    async def _pull_loop(self, sub: object, durable: str, handler: Handler, ack_wait_s: float,
                         concurrency: int) -> None:
        # Rolling window: a new message is fetched as soon as any handler finishes, so one
        # slow handler (a synthesis request waiting for an outside answer) holds up no other.
        running: set[asyncio.Task[None]] = set()
        try:
            while True:
                free = max(1, concurrency) - len(running)
                if free <= 0:
                    await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    continue
                try:
                    msgs = await sub.fetch(batch=free, timeout=1.0)  # type: ignore[attr-defined]
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # connection blips: nats reconnects; keep the loop alive
                    log.warning("fetch failed", extra={"durable": durable, "error": str(exc)})
                    await asyncio.sleep(0.5)
                    continue
                for m in msgs:
                    task = asyncio.create_task(self._handle(m, durable, handler, ack_wait_s))
                    running.add(task)
                    task.add_done_callback(running.discard)
        finally:
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)

    async def _handle(self, msg: Msg, durable: str, handler: Handler, ack_wait_s: float) -> None:
        env = Envelope()
        try:
            env.ParseFromString(msg.data)
        except Exception:  # protobuf DecodeError: not ours to retry
            log.error("undecodable message dropped", extra={"subject": msg.subject, "durable": durable})
            await msg.term()
            return
        env.sequence = msg.metadata.sequence.stream
        env.delivery = msg.metadata.num_delivered
        heartbeat = asyncio.create_task(_keep_alive(msg, ack_wait_s))
        try:
            await handler(env)
        except PermanentError as exc:
            log.error("handler failed permanently; message terminated",
                      extra={"subject": msg.subject, "durable": durable, "session_id": env.session_id,
                             "error": str(exc)})
            if await self._report_failure(msg.subject, durable, env, exc):
                await msg.term()
            else:
                await msg.nak(delay=_NAK_DELAYS_S[0])  # report again on redelivery
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # retryable or unexpected: redeliver later
            delivered = msg.metadata.num_delivered
            delay = _NAK_DELAYS_S[min(delivered - 1, len(_NAK_DELAYS_S) - 1)]
            log.warning("handler failed; will redeliver",
                        extra={"subject": msg.subject, "durable": durable, "session_id": env.session_id,
                               "error": repr(exc), "delivered": delivered,
                               "retryable": isinstance(exc, KernelEvolveError) and exc.retryable})
            await msg.nak(delay=delay)
        else:
            await msg.ack()
        finally:
            heartbeat.cancel()

    async def _report_failure(self, subject: str, durable: str, env: Envelope, exc: PermanentError) -> bool:
        """End the session the failed event belongs to (see ``failures.py``); False when
        the report could not be published (the message then comes back)."""
        failed = session_failed_event(subject, durable, env, exc)
        if failed is None:
            return True
        try:
            await self.publish(*failed)
        except BusUnavailable as pub_exc:
            log.warning("could not report a permanent failure; will redeliver",
                        extra={"subject": subject, "durable": durable, "session_id": env.session_id,
                               "error": str(pub_exc)})
            return False
        return True

    async def watch(self, subject_filter: str, after_sequence: int = 0) -> AsyncIterator[Envelope]:
        # Resuming starts the server-side consumer at the next sequence: nothing before it is resent.
        start = ({"deliver_policy": api.DeliverPolicy.BY_START_SEQUENCE, "opt_start_seq": after_sequence + 1}
                 if after_sequence > 0 else {"deliver_policy": api.DeliverPolicy.ALL})
        try:
            sub = await self._js.subscribe(subject_filter, stream=self._settings.stream, ordered_consumer=True,
                                           config=api.ConsumerConfig(**start))
        except (TimeoutError, nats.errors.Error) as exc:
            raise BusUnavailable(f"cannot watch {subject_filter}: {exc}") from exc
        try:
            async for msg in sub.messages:
                env = Envelope()
                env.ParseFromString(msg.data)
                env.sequence = msg.metadata.sequence.stream
                yield env
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    # -- key-value ------------------------------------------------------------------

    async def kv_get(self, key: str) -> KeyValueEntry | None:
        try:
            e = await self._kv.get(key)
        except (js_errors.KeyNotFoundError, js_errors.KeyDeletedError):
            return None
        except (TimeoutError, nats.errors.Error) as exc:
            raise BusUnavailable(f"kv get {key} failed: {exc}") from exc
        return KeyValueEntry(key, e.value or b"", int(e.revision or 0))

    async def kv_put(self, key: str, value: bytes) -> int:
        try:
            return int(await self._kv.put(key, value))
        except (TimeoutError, nats.errors.Error) as exc:
            raise BusUnavailable(f"kv put {key} failed: {exc}") from exc

    async def kv_create(self, key: str, value: bytes) -> int:
        try:
            return int(await self._kv.create(key, value))
        except js_errors.KeyWrongLastSequenceError as exc:
            raise ConflictError(f"{key} already exists") from exc
        except (TimeoutError, nats.errors.Error) as exc:
            if "wrong last sequence" in str(exc).lower():
                raise ConflictError(f"{key} already exists") from exc
            raise BusUnavailable(f"kv create {key} failed: {exc}") from exc

    async def kv_update(self, key: str, value: bytes, revision: int) -> int:
        try:
            return int(await self._kv.update(key, value, last=revision))
        except js_errors.KeyWrongLastSequenceError as exc:
            raise ConflictError(f"{key} changed since revision {revision}") from exc
        except (TimeoutError, nats.errors.Error) as exc:
            if "wrong last sequence" in str(exc).lower():
                raise ConflictError(f"{key} changed since revision {revision}") from exc
            raise BusUnavailable(f"kv update {key} failed: {exc}") from exc

    async def kv_keys(self, prefix: str) -> list[str]:
        # One STREAM.INFO with a subject filter: the server lists the bucket's subjects that
        # hold a value, exactly. A KV watcher (KeyValue.keys(), or watch() until its "no
        # more" marker) is not exact: nats-py sends the marker when the consumer reports
        # nothing pending and the client has counted no delivery yet, which is also the
        # case when the server has sent every key and they are still unread in the socket
        # (seen under load: an empty node list made the search skip re-timing its best
        # candidate). Keys are never deleted here, so every listed subject is a live key.
        # The server lists up to 100,000 subjects per call, far more than a session holds.
        kv_prefix = f"$KV.{self._settings.kv_bucket}."
        pattern = f"{kv_prefix}{prefix}>" if prefix.endswith(".") else f"{kv_prefix}>"
        try:
            info = await self._js.stream_info(f"KV_{self._settings.kv_bucket}", subjects_filter=pattern)
        except (TimeoutError, nats.errors.Error) as exc:
            raise BusUnavailable(f"kv keys {prefix} failed: {exc}") from exc
        subjects = info.state.subjects or {}
        keys = (subject[len(kv_prefix):] for subject, count in subjects.items() if count > 0)
        return sorted(k for k in keys if k.startswith(prefix))

    async def close(self) -> None:
        for loop in self._loops:
            await loop.stop()
        self._loops.clear()
        if not self._nc.is_closed:
            with contextlib.suppress(Exception):
                await self._nc.drain()


async def _keep_alive(msg: Msg, ack_wait_s: float) -> None:
    """Tell the server we are still working so long evaluations are not redelivered."""
    with contextlib.suppress(asyncio.CancelledError, Exception):
        while True:
            await asyncio.sleep(max(ack_wait_s / 3, 0.5))
            await msg.in_progress()


async def _ensure_stream(js: object, settings: BusSettings) -> None:
    subjects = [f"{settings.subject_prefix}.>"]
    try:
        await js.stream_info(settings.stream)  # type: ignore[attr-defined]
        return
    except js_errors.NotFoundError:
        pass
    await js.add_stream(  # type: ignore[attr-defined]
        name=settings.stream,
        subjects=subjects,
        retention=api.RetentionPolicy.LIMITS,
        storage=api.StorageType.FILE,
        max_age=float(settings.max_age_s),
        duplicate_window=120.0,
    )
