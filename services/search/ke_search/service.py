"""The search service: reacts to bus events, keeps the tree in the KV store, asks for
more candidates, and closes the session when the budget is spent.

Handlers are idempotent and order-independent (see ``state.py``); every state change
is a compare-and-set on ``search.<session>`` so replicas cannot overwrite each other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from ke_search import termination, tune
from ke_search.noise import fitness_of, promoted
from ke_search.phases import draft_room, draft_seeds
from ke_search.priors import NO_PRIORS, SkillPriors
from ke_search.repair import due_repairs
from ke_search.report import common_failure
from ke_search.resume import resume_session
from ke_search.state import RequestRecord, SearchState, request_of
from ke_search.strategy import ROOT, Strategy, is_correct, make_strategy, rank
from ke_search.tiers import contenders, provisional, tier_label, tier_of
from kernelevolve.artifacts import Artifacts, lineage_document
from kernelevolve.baseline_best import baseline_best
from kernelevolve.bus.envelope import envelope, now_ts
from kernelevolve.bus.port import EventBus
from kernelevolve.bus.records import list_nodes, load_candidate, load_session, update_session
from kernelevolve.bus.subjects import Keys, Subjects
from kernelevolve.errors import ConflictError, KernelEvolveError, NotFoundError
from kernelevolve.op_family import classify_op_family
from kernelevolve.ports.knowledge import KnowledgeReader, NoKnowledge
from kernelevolve.store import ObjectStore
from kernelevolve.v1 import common_pb2 as pb
from kernelevolve.v1 import events_pb2 as ev

log = logging.getLogger(__name__)

_BUGGY = {
    pb.EVALUATION_STATUS_COMPILE_ERROR,
    pb.EVALUATION_STATUS_RUNTIME_ERROR,
    pb.EVALUATION_STATUS_CRASHED,
    pb.EVALUATION_STATUS_TIMEOUT,
}


@dataclass
class _Effects:
    """What a state transition asks the outside world to do, applied after the CAS wins."""

    requests: list[ev.CandidateRequested]
    retimes: list[str] = field(default_factory=list)
    finish: bool = False


class SearchService:
    def __init__(self, bus: EventBus, store: ObjectStore, subjects: Subjects, *, finalists: int = 1,
                 max_retimes: int = 3, repair_attempts: int = 0,
                 knowledge: KnowledgeReader | None = None, prior_skills: int = 0,
                 max_promotions: int = 16) -> None:
        """``max_promotions``: screened contenders a session sends to the full protocol
        during the search (``tiers.py``), beside its finalists."""
        self._bus = bus
        self._max_promotions = max(0, max_promotions)
        # Skills read once per session, at its start, to bias its strategy (ke_search.priors).
        self._knowledge: KnowledgeReader = knowledge or NoKnowledge()
        self._prior_skills = prior_skills
        self._priors: dict[str, SkillPriors] = {}
        self._store = store
        self._subjects = subjects
        self._finalists = max(0, finalists)
        self._max_retimes = max(finalists, max_retimes)
        self._repair_attempts = repair_attempts
        self._locks: dict[str, asyncio.Lock] = {}
        self._timers: dict[str, asyncio.Task[None]] = {}

    async def close(self) -> None:
        """Stop the wall-clock timers (a restarted service re-arms them on the next event)."""
        timers, self._timers = self._timers, {}
        for task in timers.values():
            task.cancel()

    # -- subscriptions -----------------------------------------------------------------

    async def subscribe(self) -> None:
        s = self._subjects
        await self._bus.consume(s.started(), "search-started", self.on_event)
        await self._bus.consume(s.candidate(), "search-candidates", self.on_event)
        await self._bus.consume(s.evaluation(), "search-evaluations", self.on_event)
        await self._bus.consume(s.exhausted(), "search-exhausted", self.on_event)
        await self._bus.consume(s.cancel(), "search-cancel", self.on_event)
        await self._bus.consume(s.retimed(), "search-retimed", self.on_event)
        await self._bus.consume(s.failed(), "search-failed", self.on_event)
        await self._bus.consume(s.resume(), "search-resume", self.on_event)

    async def on_event(self, env: ev.Envelope) -> None:
        kind = env.WhichOneof("payload")
        lock = self._locks.setdefault(env.session_id, asyncio.Lock())
        async with lock:
            if kind == "session_started":
                await self._on_started(env.session_started.session)
            elif kind == "candidate_generated":
                await self._on_candidate(env.candidate_generated)
            elif kind == "evaluation_completed":
                await self._on_evaluation(env.evaluation_completed)
            elif kind == "candidate_request_exhausted":
                await self._on_exhausted(env.candidate_request_exhausted)
            elif kind == "session_cancel_requested":
                await self._on_cancel(env.session_cancel_requested.session_id)
            elif kind == "candidate_retimed":
                await self._on_retimed(env.candidate_retimed)
            elif kind == "session_failed":
                await self._on_failed(env.session_failed)
            elif kind == "session_resume_requested":
                await resume_session(env.session_resume_requested, bus=self._bus, store=self._store,
                                     start=self._on_started, transition=self._transition, finish=self._finish)

    # -- handlers ------------------------------------------------------------------------

    async def _on_started(self, session: pb.Session) -> None:
        sid = session.session_id
        make_strategy(session.strategy or "greedy")  # unknown strategy: permanent error, said early
        await self._load_priors(session)
        state = SearchState(session_id=sid, budget=session.budget, max_inflight=max(1, session.max_inflight or 1))
        try:
            await self._bus.kv_create(Keys.search_state(sid), state.to_json())
        except ConflictError:
            log.info("session already started; replay ignored", extra={"session_id": sid})
        self._arm_timer(session)
        await self._transition(sid, lambda st, nodes: None)

    async def _load_priors(self, session: pb.Session) -> None:
        """Skills for this session's hardware and op family; none (logged) when the
        knowledge service cannot answer: a search without priors is still a search."""
        if self._prior_skills <= 0 or session.session_id in self._priors:
            return
        family = classify_op_family(session.spec.source)
        try:
            # The port blocks; a worker thread keeps this loop (maybe the knowledge server's) free.
            # A skill timed under another precision contract is no evidence here.
            hints = await asyncio.to_thread(self._knowledge.skills, hardware_kind=session.hardware.kind,
                                            op_family=family, limit=self._prior_skills,
                                            precision=session.precision or "default")
        except KernelEvolveError as exc:
            log.warning("no skill priors", extra={"session_id": session.session_id, "error": str(exc)})
            hints = []
        self._priors[session.session_id] = SkillPriors(hints)
        log.info("skill priors", extra={"session_id": session.session_id, "op_family": family,
                                        "skills": len(self._priors[session.session_id])})
    def _arm_timer(self, session: pb.Session) -> None:
        """With a wall-clock budget, wake the session up when it runs out: no event may
        come then (all evaluations slow), and the session must still end with its best."""
        limit = termination.deadline(session)
        sid = session.session_id
        if limit is None or sid in self._timers:
            return

        async def wake() -> None:
            await asyncio.sleep(max(0.0, limit - time.time()) + 0.01)
            try:
                async with self._locks.setdefault(sid, asyncio.Lock()):
                    await self._transition(sid, lambda st, nodes: None)
            except Exception:  # noqa: BLE001 - the next event retries; say why this one failed
                log.exception("time-limit wake-up failed", extra={"session_id": sid})

        self._timers[sid] = asyncio.get_running_loop().create_task(wake())

    async def _on_candidate(self, msg: ev.CandidateGenerated) -> None:
        cand = msg.candidate
        await self._ensure_node(cand)

        def apply(st: SearchState, nodes: list[pb.Node]) -> None:
            if cand.candidate_id not in st.generated:
                st.generated.append(cand.candidate_id)
            if cand.duplicate_of and cand.candidate_id not in st.duplicates:
                st.duplicates.append(cand.candidate_id)

        await self._transition(cand.session_id, apply)

    async def _on_evaluation(self, msg: ev.EvaluationCompleted) -> None:
        sid, result = msg.session_id, msg.result
        cid = result.candidate_id
        if self._prior_skills > 0 and sid not in self._priors:  # a restarted service reads them again
            await self._load_priors(await load_session(self._bus, sid))
        fitness, low, high, note = fitness_of(result, (await self._load_session(sid)).baseline)
        key = Keys.node(sid, cid)
        entry = await self._bus.kv_get(key)
        if entry is None:
            # The evaluation overtook the candidate event: build the node from the record.
            await self._ensure_node(await load_candidate(self._bus, sid, cid))
            entry = await self._bus.kv_get(key)
            assert entry is not None
        for _attempt in range(20):
            node = pb.Node()
            node.ParseFromString(entry.value)
            if node.evaluated:
                break
            node.evaluated = True
            node.status = result.status
            node.fitness, node.fitness_low, node.fitness_high = fitness, low, high
            node.roofline_fraction = result.diagnosis.roofline_fraction
            node.buggy = result.status in _BUGGY
            node.report_key = result.report_key
            node.reason = result.reason[:500]
            node.interrupted_evaluations = result.interrupted_attempts
            node.tier = tier_of(result)
            try:
                await self._bus.kv_update(key, node.SerializeToString(), entry.revision)
            except ConflictError:
                # Someone else wrote the node first (a replica, a replay): re-read and re-apply.
                # ConflictError is permanent to the bus and would end the session.
                entry = await self._bus.kv_get(key)
                assert entry is not None
                continue
            log.info("node evaluated", extra={"session_id": sid, "candidate_id": cid,
                                              "status": pb.EvaluationStatus.Name(result.status),
                                              "fitness": node.fitness})
            break

        def apply(st: SearchState, nodes: list[pb.Node]) -> None:
            if cid not in st.generated:
                st.generated.append(cid)
            if cid not in st.evaluated:
                st.evaluated.append(cid)
            if note and note not in st.notes:
                st.notes.append(note)

        await self._transition(sid, apply)

    async def _on_exhausted(self, msg: ev.CandidateRequestExhausted) -> None:
        def apply(st: SearchState, nodes: list[pb.Node]) -> None:
            rec = st.requests.get(msg.request_id)
            if rec is None:
                return
            made = sum(1 for c in st.generated if request_of(c) == msg.request_id)
            rec.exhausted = max(0, rec.count - made)
            # Out of launch-config neighbours is not out of children, nor the other way round.
            out = st.tune_exhausted if rec.tune else st.exhausted_parents
            if msg.parent_id not in out:
                out.append(msg.parent_id)

        log.info("parent exhausted", extra={"session_id": msg.session_id, "parent_id": msg.parent_id,
                                            "reason": msg.reason})
        await self._transition(msg.session_id, apply)

    async def _on_retimed(self, msg: ev.CandidateRetimed) -> None:
        sid, result = msg.session_id, msg.result
        cid = result.candidate_id
        fitness, low, high, _note = fitness_of(result, (await self._load_session(sid)).baseline)
        key = Keys.node(sid, cid)
        entry = await self._bus.kv_get(key)
        if entry is None:
            raise NotFoundError(f"re-timing for unknown candidate {cid} in session {sid}")
        for _attempt in range(20):
            node = pb.Node()
            node.ParseFromString(entry.value)
            if node.retimed:
                break
            node.retimed = True
            node.first_fitness = node.fitness
            node.tier = tier_of(result)  # a screened node's re-check is its full verdict
            if result.status == pb.EVALUATION_STATUS_CORRECT:
                node.fitness, node.fitness_low, node.fitness_high = fitness, low, high
            else:
                # Correct once, not twice (nondeterminism, flakiness): never called best.
                node.fitness = node.fitness_low = node.fitness_high = 0.0
                node.status = result.status
                node.reason = f"failed its re-check in a fresh worker: {result.reason}"[:500]
            try:
                await self._bus.kv_update(key, node.SerializeToString(), entry.revision)
            except ConflictError:  # written meanwhile: re-read and re-apply (see _on_evaluation)
                entry = await self._bus.kv_get(key)
                assert entry is not None
                continue
            log.info("finalist re-timed", extra={"session_id": sid, "candidate_id": cid,
                                                 "first_fitness": node.first_fitness, "fitness": node.fitness})
            break

        def apply(st: SearchState, nodes: list[pb.Node]) -> None:
            if cid not in st.retimed:
                st.retimed.append(cid)

        await self._transition(sid, apply)

    async def _on_failed(self, msg: ev.SessionFailed) -> None:
        """A service failed permanently on this session's work: end it as failed, keeping
        the best verified kernel so far. The first failure names the session's error."""
        sid = msg.session_id
        log.info("session failing", extra={"session_id": sid, "service": msg.service, "reason": msg.reason})
        if await self._bus.kv_get(Keys.search_state(sid)) is None:
            # The failure came before the search state existed (e.g. on SessionStarted itself).
            session = await self._load_session(sid)
            state = SearchState(session_id=sid, budget=session.budget,
                                max_inflight=max(1, session.max_inflight or 1))
            try:
                await self._bus.kv_create(Keys.search_state(sid), state.to_json())
            except ConflictError:
                pass

        def apply(st: SearchState, nodes: list[pb.Node]) -> None:
            if not st.failure:
                st.failure = msg.reason or f"{msg.service}: {msg.error_type}"
                st.bad_input = msg.bad_input
            # Nothing more will be asked for or re-timed.
            st.outbox_requests, st.outbox_retimes = [], []

        await self._transition(sid, apply)

    async def _on_cancel(self, sid: str) -> None:
        def apply(st: SearchState, nodes: list[pb.Node]) -> None:
            st.cancelled = True

        await self._transition(sid, apply)

    # -- the one state machine --------------------------------------------------------------

    async def _transition(self, sid: str, apply: Callable[[SearchState, list[pb.Node]], None]) -> None:
        """Read state, apply a change, decide what to ask for next, CAS-write, then act."""
        session = await self._load_session(sid)
        self._arm_timer(session)
        for _attempt in range(20):
            entry = await self._bus.kv_get(Keys.search_state(sid))
            if entry is None:
                raise NotFoundError(f"no search state for session {sid}")
            st = SearchState.from_json(entry.value)
            if st.done:
                if session.status == pb.SESSION_STATUS_RUNNING:
                    # Crashed between deciding to finish and publishing it: finish again
                    # (idempotent: same keys, same dedup id).
                    await self._update_session(sid, st, await self.nodes(sid), finished=True)
                    await self._finish(sid, st)
                return
            nodes = await self.nodes(sid)
            apply(st, nodes)
            effects = _Effects(requests=[])
            if not st.finalizing:
                self._explore(st, nodes, session, effects)
            if st.finalizing:
                self._finalize_step(st, nodes, effects)
            st.outbox_requests.extend(r.request_id for r in effects.requests)
            st.outbox_retimes.extend(effects.retimes)
            try:
                revision = await self._bus.kv_update(Keys.search_state(sid), st.to_json(), entry.revision)
            except ConflictError:
                continue  # another replica moved first: re-read and re-apply
            await self._update_session(sid, st, nodes, finished=effects.finish)
            await self._publish_outbox(session, st, nodes, revision)
            if effects.finish:
                await self._finish(sid, st)
            return
        raise ConflictError(f"search state of {sid} kept changing under us")

    async def _publish_outbox(self, session: pb.Session, st: SearchState, nodes: list[pb.Node],
                              revision: int) -> None:
        """Publish what committed transitions decided (this one's and any a crash left behind),
        then clear the outbox. Publishing twice is harmless: ids de-duplicate downstream."""
        if not st.outbox_requests and not st.outbox_retimes:
            return
        sid = session.session_id
        for cid in st.outbox_retimes:
            await self._request_retime(session, cid)
        for rid in st.outbox_requests:
            rec = st.requests[rid]
            tried = [pb.Transformation(name=n.transformation.name, params=n.transformation.params)
                     for n in nodes if n.parent_id == rec.parent_id]
            req = ev.CandidateRequested(session_id=sid, request_id=rid, parent_id=rec.parent_id, count=rec.count,
                                        hardware=session.hardware, tried=tried,
                                        repair_attempt=rec.repair_attempt, tune=rec.tune,
                                        precision=session.precision or "default")
            log.info("requesting candidates", extra={"session_id": sid, "request_id": rid, "tune": rec.tune,
                                                     "parent_id": rec.parent_id or ROOT, "count": rec.count})
            await self._bus.publish(self._subjects.request(sid), envelope(sid, candidate_requested=req),
                                    dedup_id=f"req-{sid}-{rid}")
        st.outbox_requests, st.outbox_retimes = [], []
        try:
            await self._bus.kv_update(Keys.search_state(sid), st.to_json(), revision)
        except ConflictError:
            pass  # someone moved on; they publish our leftovers again, which is harmless

    def _explore(self, st: SearchState, nodes: list[pb.Node], session: pb.Session, effects: _Effects) -> None:
        """Ask for more candidates, or declare the search over (budget spent, cancelled, or
        nothing left to expand with nothing in flight)."""
        reason = termination.end_reason(st, nodes, session, time.time())
        if reason:
            st.finalizing, st.end_reason = True, reason
            return
        strategy: Strategy = make_strategy(session.strategy or "greedy", self._priors.get(st.session_id, NO_PRIORS))
        seen = promoted([n for n in nodes if not n.duplicate_of])  # noise-aware: see noise.py
        self._retime_elites(st, strategy, seen, effects)
        self._promote(st, strategy, nodes, effects)
        want = st.want()
        if want == 0:
            if st.idle():
                st.finalizing, st.end_reason = True, termination.EXHAUSTED
            return
        if self._ask_repairs(st, nodes, want, effects):
            return
        seeds = draft_seeds(strategy, session.seeds)
        stage = tune.Stage.of(session)
        if stage.share > 0 and not st.tuning and stage.structural_left(st, seeds) == 0:
            if tune.structural_pending(st):
                return  # a candidate still to come may be a twin, which costs nothing: wait and see
            self._start_tuning(st, "the structural share of the budget is spent")
        if st.tuning:
            ask = self._ask_tuning(st, seen, stage, want, effects)
            if ask is not tune.Ask.NONE:
                return
            # every elite is out of neighbours: the structural search takes the rest
        draft = draft_room(st, seeds)
        if draft:
            parent: str | None = ROOT
            want = min(want, draft)
        else:
            parent = strategy.select_parent(seen, set(st.exhausted_parents))
        if parent is None:
            if stage.share > 0 and not st.tuning and st.idle():
                # stalled, not waiting: nothing out could give the strategy a parent
                self._start_tuning(st, "the strategy has nothing left to expand")
                if self._ask_tuning(st, seen, stage, want, effects) is not tune.Ask.NONE:
                    return
            if st.idle():
                st.finalizing, st.end_reason = True, termination.EXHAUSTED
            return
        if stage.share > 0 and not st.tuning:
            want = min(want, stage.structural_left(st, seeds))  # > 0: else the stage was due above
        self._ask(st, RequestRecord(parent_id=parent, count=want), effects)

    def _ask(self, st: SearchState, rec: RequestRecord, effects: _Effects) -> None:
        rid = f"r{st.next_request}"
        st.next_request += 1
        st.requests[rid] = rec
        effects.requests.append(ev.CandidateRequested(session_id=st.session_id, request_id=rid,
                                                      parent_id=rec.parent_id, count=rec.count,
                                                      repair_attempt=rec.repair_attempt, tune=rec.tune))

    def _start_tuning(self, st: SearchState, why: str) -> None:
        st.tuning = True
        log.info("tuning stage started", extra={"session_id": st.session_id, "evaluated": len(st.evaluated),
                                        "budget": st.budget, "reason": why})

    def _ask_tuning(self, st: SearchState, nodes: list[pb.Node], stage: tune.Stage, want: int,
                    effects: _Effects) -> tune.Ask:
        ask, wanted = tune.requests(st, nodes, stage.elite, want)
        for parent, count in wanted:
            self._ask(st, RequestRecord(parent_id=parent, count=count, tune=True), effects)
        return ask

    def _ask_repairs(self, st: SearchState, nodes: list[pb.Node], want: int, effects: _Effects) -> bool:
        """Failed repairable candidates are repaired before anything new is explored."""
        due = due_repairs(st, nodes, self._repair_attempts)[:want]
        for parent, attempt in due:
            self._ask(st, RequestRecord(parent_id=parent, count=1, repair_attempt=attempt), effects)
        return bool(due)

    def _retime_elites(self, st: SearchState, strategy: Strategy, nodes: list[pb.Node],
                       effects: _Effects) -> None:
        """Re-time the elites a strategy is about to rely on (islands: the migrants) in a
        fresh worker, once each; they are promoted only after (see ``Islands``)."""
        wanted = getattr(strategy, "elites_to_retime", None)
        if wanted is None:
            return
        for nid in wanted(nodes, set(st.exhausted_parents)):
            if nid not in st.retime_requested:
                st.retime_requested.append(nid)
                st.elite_retimes.append(nid)
                effects.retimes.append(nid)

    def _promote(self, st: SearchState, strategy: Strategy, nodes: list[pb.Node], effects: _Effects) -> None:
        """Screened contenders (within noise of the best, or asked for by the strategy) to
        the full protocol, once each, at most ``max_promotions`` a session."""
        asked_for = getattr(strategy, "nodes_to_promote", None)
        asked = list(asked_for(nodes)) if asked_for is not None else []
        room = self._max_promotions - len(st.promotions)
        for nid in contenders(nodes, set(st.retime_requested), room, asked):
            st.retime_requested.append(nid)
            st.promotions.append(nid)
            effects.retimes.append(nid)

    def _finalize_step(self, st: SearchState, nodes: list[pb.Node], effects: _Effects) -> None:
        """Re-time the fittest correct node in a fresh worker until the fittest one has been
        re-timed (bounded), so a lucky first timing cannot be called best. A cancelled or
        timed-out session is still finalized this way; only a failed one is not."""
        stopping = bool(st.failure)
        if st.retimes_pending() and not stopping:
            return
        correct = sorted((n for n in nodes if is_correct(n)), key=rank, reverse=True)
        if (not correct and not stopping and not st.cancelled and st.inflight() > 0
                and st.end_reason.startswith(termination.TIME_LIMIT)):
            # Out of time with nothing verified: the candidates in flight are the session's
            # only chance of a result, so it waits for their verdicts (and asks for nothing
            # new). A 4 GiB operator's first verdict took 94-233 s on an H200 (2026-11-28);
            # a shorter time limit used to end such a session with no kernel at all.
            return
        spent = len(set(st.retime_requested) - set(st.elite_retimes) - set(st.promotions))
        # A screen alone is never a result: with no finalists asked for (and no promotion
        # room left), the fittest node is still judged fully when it was only screened.
        finalists = max(self._finalists, 1 if correct and provisional(correct[0]) else 0)
        if (stopping or finalists == 0 or not correct or correct[0].node_id in st.retimed
                or spent >= self._max_retimes):
            st.done = True
            effects.finish = True
            if not st.end_reason:
                st.end_reason = termination.FAILED if st.failure else termination.CANCELLED if st.cancelled else ""
            return
        room = min(finalists, self._max_retimes - spent)
        chosen = [n.node_id for n in correct if n.node_id not in st.retime_requested][:room]
        st.retime_requested.extend(chosen)
        effects.retimes.extend(chosen)

    async def _request_retime(self, session: pb.Session, cid: str) -> None:
        sid = session.session_id
        cand = await load_candidate(self._bus, sid, cid)
        req = ev.RetimeRequested(session_id=sid, candidate=cand, hardware=session.hardware)
        log.info("re-timing finalist", extra={"session_id": sid, "candidate_id": cid})
        await self._bus.publish(self._subjects.retime(sid, session.hardware.kind or "cpu"),
                                envelope(sid, retime_requested=req), dedup_id=f"retime-{sid}-{cid}")

    # -- helpers --------------------------------------------------------------------------

    async def _load_session(self, sid: str) -> pb.Session:
        return await load_session(self._bus, sid)

    async def _ensure_node(self, cand: pb.Candidate) -> None:
        depth = 0
        if cand.parent_id:
            parent = await self._bus.kv_get(Keys.node(cand.session_id, cand.parent_id))
            if parent is not None:
                p = pb.Node()
                p.ParseFromString(parent.value)
                depth = p.depth + 1
        node = pb.Node(node_id=cand.candidate_id, parent_id=cand.parent_id, transformation=cand.transformation,
                       depth=depth, source_key=cand.source_key, duplicate_of=cand.duplicate_of,
                       reason=f"duplicate of {cand.duplicate_of}: not evaluated" if cand.duplicate_of else "")
        try:
            await self._bus.kv_create(Keys.node(cand.session_id, cand.candidate_id), node.SerializeToString())
        except ConflictError:
            pass  # already there (replay, or created by an overtaking evaluation)

    async def nodes(self, sid: str) -> list[pb.Node]:
        return await list_nodes(self._bus, sid)

    async def _update_session(self, sid: str, st: SearchState, nodes: list[pb.Node], finished: bool) -> None:
        def change(session: pb.Session) -> bool:
            session.generated = len(st.generated)
            session.evaluated = len(st.evaluated)
            best = _best(nodes, verified_only=finished)
            if best is not None:
                session.best_candidate_id = best.node_id
                session.best_speedup = best.fitness
            if finished:
                session.end_reason = st.end_reason
                if st.failure:
                    session.status = pb.SESSION_STATUS_FAILED
                    session.error = st.failure
                    session.bad_input = st.bad_input
                elif st.cancelled:
                    session.status = pb.SESSION_STATUS_CANCELLED
                else:
                    session.status = pb.SESSION_STATUS_COMPLETED
                session.common_failure = common_failure(nodes)
                session.finished_at.CopyFrom(now_ts())
            return True

        await update_session(self._bus, sid, change)

    async def _finish(self, sid: str, st: SearchState) -> None:
        session = await self._load_session(sid)
        nodes = await self.nodes(sid)
        art = Artifacts(session.artifact_prefix)
        best = _best(nodes, verified_only=True)
        best_key = ""
        if best is not None:
            source = await self._store.get(best.source_key)
            timed = "re-timed in a fresh worker" if best.retimed else "first evaluation"
            header = (f"# KernelEvolve best candidate {best.node_id} for {session.spec.name}: "
                      f"speedup {best.fitness:.3f}x on {session.hardware.kind} ({timed}; "
                      f"precision contract {session.precision or 'default'})\n")
            await self._store.put(art.best_kernel, header.encode() + source, "text/x-python")
            best_key = art.best_kernel
        lineage = lineage_document(sid, session.spec.name, nodes)
        await self._store.put(art.lineage, json.dumps(lineage, indent=2).encode(), "application/json")
        summary = {
            "session_id": sid,
            "spec": session.spec.name,
            "status": pb.SessionStatus.Name(session.status),
            "budget": session.budget,
            "generated": len(st.generated),
            "evaluated": len(st.evaluated),
            "best_candidate_id": best.node_id if best else "",
            # The best's speedup is its re-time in a fresh worker when it had one (the figure
            # reported), with the first evaluation's beside it.
            "best_speedup": best.fitness if best else 0.0,
            "best_retimed": bool(best and best.retimed),
            "best_speedup_source": ("fresh-worker re-time" if best and best.retimed
                                    else "first evaluation" if best else ""),
            "best_first_speedup": (best.first_fitness if best.retimed else best.fitness) if best else 0.0,
            # The tier whose verdict the best's speedup is (``_best``: never a screen).
            "best_tier": tier_label(best) if best else "",
            "precision": session.precision or "default",
            # the baseline nothing beat, said plainly (kernelevolve.baseline_best)
            "verdict": baseline_best(best.fitness if best else None, session.baseline or "eager"),
            "end_reason": st.end_reason,
            "duplicates": len(st.duplicates),
            "notes": st.notes,
            "options": {"seeds": session.seeds, "time_limit_s": session.time_limit_s, "plateau": session.plateau,
                        "target_roofline": session.target_roofline, "baseline": session.baseline or "eager",
                        "tune_share": session.tune_share, "tune_elite": session.tune_elite,
                        "precision": session.precision or "default"},
            "tuning": tune.summary(st, nodes),
            "error": session.error,
            "bad_input": session.bad_input,
            "common_failure": session.common_failure,
            "finished_at": datetime.now(UTC).isoformat(),
        }
        await self._store.put(art.summary, json.dumps(summary, indent=2).encode(), "application/json")
        log.info("session completed", extra={"session_id": sid, "evaluated": len(st.evaluated),
                                             "best_candidate_id": summary["best_candidate_id"],
                                             "best_speedup": summary["best_speedup"]})
        done = ev.SessionCompleted(session=session, best_source_key=best_key)
        await self._bus.publish(self._subjects.completed(sid), envelope(sid, session_completed=done),
                                dedup_id=f"done-{sid}")


def _best(nodes: list[pb.Node], verified_only: bool = False) -> pb.Node | None:
    """The fittest correct node with a full verdict (a screened one is provisional: never
    called best). ``verified_only`` (the reported best): among re-timed nodes when any was
    re-timed correct, so a lucky first timing is never reported once the re-timing budget
    is spent on others."""
    correct = [n for n in nodes if is_correct(n) and not provisional(n)]
    if verified_only and any(n.retimed for n in correct):
        correct = [n for n in correct if n.retimed]
    if not correct:
        return None
    return max(correct, key=rank)
