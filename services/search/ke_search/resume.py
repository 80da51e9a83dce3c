"""Resuming a session whose processes stopped before it ended (``SessionResumeRequested``).

Everything a session needs to continue is already durable on the bus: the search state
(``search.<session>``: requests, generated, evaluated, re-timings asked and done, budget,
the outbox of effects decided but maybe not published), the tree's nodes, the candidates'
records, and the unacknowledged events themselves, which JetStream redelivers to the
durable consumers once their ack wait runs out. The strategy keeps no state of its own:
it is rebuilt from the tree on every transition.

What no redelivery brings back is an effect whose triggering event was already
acknowledged: an outbox written but not published when the process died, or a finished
session whose summary files were not all written. A resume re-runs one empty transition
(which publishes the outbox again; ids de-duplicate) and finishes a finished session
again (same keys, same de-duplication id). An evaluation that was in flight is redone by
the evaluator on redelivery; one whose report is stored is never run again.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from ke_search.state import SearchState
from kernelevolve.artifacts import Artifacts
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import load_session
from kernelevolve.bus.subjects import Keys
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

Apply = Callable[[SearchState, list[pb.Node]], None]


async def resume_session(msg: ev.SessionResumeRequested, *, bus: EventBus, store: ObjectStore,
                         start: Callable[[pb.Session], Awaitable[None]],
                         transition: Callable[[str, Apply], Awaitable[None]],
                         finish: Callable[[str, SearchState], Awaitable[None]]) -> None:
    """``start``, ``transition`` and ``finish`` are the search service's own: a resume is
    one more event of the same state machine, not a second one."""
    sid = msg.session_id
    session = await load_session(bus, sid)
    entry = await bus.kv_get(Keys.search_state(sid))
    if entry is None:
        # Stopped before the search saw SessionStarted (its redelivery re-creates the state
        # too; starting here is idempotent).
        log.info("resume: session not started yet; starting it", extra={"session_id": sid})
        await start(session)
        entry = await bus.kv_get(Keys.search_state(sid))
        if entry is None:
            return
    st = SearchState.from_json(entry.value)
    if st.done:
        if session.status == pb.SESSION_STATUS_RUNNING:
            # Decided to finish, died before the record said so: the transition finishes it.
            await transition(sid, lambda st, nodes: None)
        elif not await store.exists(Artifacts(session.artifact_prefix).summary):
            log.info("resume: finished session without its summary; writing its end again",
                     extra={"session_id": sid})
            await finish(sid, st)
        return
    budget = msg.budget

    def apply(st: SearchState, nodes: list[pb.Node]) -> None:
        if budget > 0:
            st.budget = budget

    log.info("resuming session", extra={"session_id": sid, "evaluated": len(st.evaluated),
                                        "generated": len(st.generated), "budget": budget or st.budget,
                                        "outbox": len(st.outbox_requests) + len(st.outbox_retimes)})
    await transition(sid, apply)
