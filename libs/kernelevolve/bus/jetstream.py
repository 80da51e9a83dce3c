"""NATS JetStream adapter of the bus port.

One stream (``KE``, subjects ``ke.>``, limits retention) holds every event, so any
number of durable consumers can read a subject independently; processes that share a
durable name share its messages (a work queue). One KV bucket holds session records
and the search tree, updated with compare-and-set.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import nats
import nats.errors
import nats.js.errors as js_errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import api
from nats.js.client import JetStreamContext
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

PullSubscription = JetStreamContext.PullSubscription

log = logging.getLogger(__name__)

# The longest one fetch waits for messages, and so the longest a stopping consumer waits for
# its last fetch (it does not cancel one, see _PullLoop).
_FETCH_TIMEOUT_S = 1.0
# Redelivery back-off after a failed handler: quick first retry, then slower.
_NAK_DELAYS_S = (1.0, 5.0, 15.0, 30.0)


class _PullLoop:
    """One consumer: keeps up to ``concurrency`` handlers running, each message on its own,
    and refills a free slot at once. Waiting for a whole fetched batch before the next
    fetch let one slow handler (an evaluation of minutes) hold back messages already
    delivered with it while their ack-wait ran (kept alive by heartbeats, but not handled).

    ``stop()`` does not cancel the loop; it sets a flag that the loop reads between fetches
    (one fetch lasts at most ``_FETCH_TIMEOUT_S``, so a stop takes up to about 1 s).
    Cancelling a fetch lost messages two ways: nats-py's ``fetch`` gathers a batch in a
    local list, so a cancel mid-batch dropped what it had gathered (unacknowledged until
    ``ack_wait`` ran out); and its ``next_msg`` waits with ``asyncio.wait_for``, which on
    Python 3.11 returns a message that arrived in the same loop turn as the cancel and drops
    the cancel, so the loop fetched on forever and ``stop()``, ``close()`` and a process's
    graceful shutdown hung. The 300-candidate load test hung so in 3 runs of 16 with every
    verdict already received. What the stopping consumer holds (its last fetch, the handlers
    it cancels, what a pull request delivered after the last fetch) is given back (nak) for
    another consumer to take at once."""

    def __init__(self, sub: PullSubscription, durable: str, handle: Callable[[Msg], Coroutine[Any, Any, None]],
                 concurrency: int) -> None:
        self._sub = sub
        self._handle = handle
        self._concurrency = max(1, concurrency)
        self._stopping = False
        self._wake = asyncio.Event()
        self._last_fetch = 0.0
        self._task = asyncio.create_task(self._run(), name=f"consume:{durable}")
        self._durable = durable

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        # asyncio.wait, not ``await task``: it neither raises the loop's end nor swallows a
        # cancel of the caller.
        await asyncio.wait({self._task})
        # A pull request of the last fetch can outlive it by up to the fetch timeout
        # (nats-py returns early when a status of an older request arrives); what it
        # delivers lands in the subscription's queue. Let it expire, then give back what
        # came. Unsubscribing earlier is no shortcut: a message the server sent before it
        # saw the unsubscribe is dropped by the client and waits out ack_wait (1 run of 80 of
        # tests/bus/test_consume_stop.py held a message when an idle fetch was cut short so).
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, self._last_fetch + _FETCH_TIMEOUT_S + 0.1 - loop.time()))
        await _give_back(await _take_pending(self._sub))
        with contextlib.suppress(Exception):
            await self._sub.unsubscribe()

    async def _run(self) -> None:
        running: set[asyncio.Task[None]] = set()

        def finished(task: asyncio.Task[None]) -> None:
            running.discard(task)
            self._wake.set()

        try:
            while not self._stopping:
                if len(running) >= self._concurrency:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                self._last_fetch = asyncio.get_running_loop().time()
                try:
                    msgs = await self._sub.fetch(batch=self._concurrency - len(running), timeout=_FETCH_TIMEOUT_S)
                except (TimeoutError, nats.errors.TimeoutError):
                    continue
                except Exception as exc:  # connection blips: nats reconnects; keep the loop alive
                    log.warning("fetch failed", extra={"durable": self._durable, "error": str(exc)})
                    await asyncio.sleep(0.5)
                    continue
                if self._stopping:
                    await _give_back(msgs)
                    break
                for m in msgs:
                    task = asyncio.create_task(self._handle(m), name=f"handle:{self._durable}")
                    running.add(task)
                    task.add_done_callback(finished)
        finally:
            for task in list(running):
                task.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)


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
        loop = _PullLoop(sub, durable, functools.partial(self._handle, durable=durable, handler=handler,
                                                         ack_wait_s=ack_wait_s), concurrency)
        self._loops.append(loop)
        return loop

    async def _handle(self, msg: Msg, *, durable: str, handler: Handler, ack_wait_s: float) -> None:
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
        except asyncio.CancelledError:  # the consumer stops: give the message back now
            await _give_back([msg])
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
        # Together: each stop waits out its last fetch (up to _FETCH_TIMEOUT_S).
        loops, self._loops = self._loops, []
        await asyncio.gather(*(loop.stop() for loop in loops), return_exceptions=True)
        if not self._nc.is_closed:
            with contextlib.suppress(Exception):
                await self._nc.drain()


async def _give_back(msgs: list[Msg]) -> None:
    """Nak without delay: the server redelivers at once instead of after ack_wait."""
    for m in msgs:
        with contextlib.suppress(Exception):
            await m.nak()


async def _take_pending(sub: PullSubscription) -> list[Msg]:
    """What the subscription holds delivered and not yet fetched. ``fetch`` takes its
    pending messages first; asking for one more than it holds makes it send a no-wait
    request (answered at once) instead of a lingering one."""
    pending = sub.pending_msgs
    if not pending:
        return []
    try:
        return list(await sub.fetch(batch=pending + 1, timeout=0.5))
    except Exception:  # nothing more to take; what stays is redelivered after ack_wait
        return []


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
