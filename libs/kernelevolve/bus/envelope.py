"""Building envelopes: one helper so every event gets an id, a session id and a time."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from google.protobuf.timestamp_pb2 import Timestamp

from kernelevolve.v1 import events_pb2 as ev


def now_ts(clock: datetime | None = None) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(clock or datetime.now(UTC))
    return ts


def envelope(session_id: str, event_id: str | None = None, **payload: object) -> ev.Envelope:
    """``envelope(sid, candidate_generated=msg)``: exactly one payload field."""
    if len(payload) != 1:
        raise ValueError("an envelope carries exactly one payload")
    ((field, msg),) = payload.items()
    env = ev.Envelope(event_id=event_id or uuid.uuid4().hex, session_id=session_id, occurred_at=now_ts())
    getattr(env, field).CopyFrom(msg)
    return env


def kind(env: ev.Envelope) -> str:
    return env.WhichOneof("payload") or ""
