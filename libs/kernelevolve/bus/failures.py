"""What the bus does when a handler fails permanently on a session's event.

Both adapters call ``session_failed_event`` where they classify a handler's exception:
a ``PermanentError`` terminates the message (retrying cannot help), and without more
the session would wait forever for work that will never come. Instead the adapter
publishes ``SessionFailed`` on ``<prefix>.<session>.session.failed``; the search service,
which owns the session state, ends the session as failed with the one-line reason.
Handlers themselves only translate; this is the one place that turns a permanent
failure into a session-ending event.
"""

from __future__ import annotations

from kernelevolve.bus.envelope import envelope, kind
from kernelevolve.bus.subjects import Subjects
from kernelevolve.errors import InvalidArgumentError, InvalidSpecError, PermanentError
from kernelevolve.v1 import events_pb2 as ev

# Errors that mean the submitted input is at fault (the CLI exits 2 for them).
_BAD_INPUT = (InvalidSpecError, InvalidArgumentError)


def service_of(durable: str) -> str:
    """Durable names are ``<service>`` or ``<service>-<what>`` (``evaluator-cpu``, ``search-started``)."""
    return durable.split("-", 1)[0]


def one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def session_failed_event(subject: str, durable: str, env: ev.Envelope,
                         exc: PermanentError) -> tuple[str, ev.Envelope, str] | None:
    """(subject, envelope, dedup id) to publish for ``exc``, or None when there is no
    session to end (no session id, or the failed event is itself a failure report)."""
    sid = env.session_id
    if not sid or kind(env) in ("session_failed", "session_completed"):
        return None
    service = service_of(durable)
    error_type = type(exc).__name__
    msg = ev.SessionFailed(
        session_id=sid, service=service, error_type=error_type,
        reason=one_line(f"{service}: {error_type}: {exc}"), bad_input=isinstance(exc, _BAD_INPUT),
        failed_event_id=env.event_id, failed_subject=subject,
    )
    prefix = subject.split(".", 1)[0]
    return (Subjects(prefix).failed(sid), envelope(sid, session_failed=msg),
            f"failed-{sid}-{durable}-{env.event_id}")
