"""Per-session search bookkeeping, persisted as JSON in the bus KV (``search.<session>``).

Order-independent and idempotent: candidate and evaluation events may arrive in any
order and more than once (at-least-once delivery); sets of ids make replays no-ops.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

FREE_TWINS = 3


def request_of(candidate_id: str) -> str:
    """Candidate ids are ``<request_id>-<n>``: the synthesizer derives them from the request."""
    return candidate_id.rsplit("-", 1)[0]


@dataclass
class RequestRecord:
    parent_id: str
    count: int
    exhausted: int = 0
    # > 0: a repair of the failed parent (see repair.py).
    repair_attempt: int = 0
    # Launch-config neighbours of the parent, for the tuning stage (see tune.py).
    tune: bool = False


@dataclass
class SearchState:
    session_id: str
    budget: int
    max_inflight: int
    next_request: int = 1
    requests: dict[str, RequestRecord] = field(default_factory=dict)
    generated: list[str] = field(default_factory=list)
    evaluated: list[str] = field(default_factory=list)
    exhausted_parents: list[str] = field(default_factory=list)
    cancelled: bool = False
    # Set when a service failed permanently on one of this session's events: the session
    # ends as failed with this one-line reason ("synthesizer: InvalidSpecError: ...").
    failure: str = ""
    bad_input: bool = False
    # Search over; finalists are being re-timed in fresh workers before one is called best.
    finalizing: bool = False
    retime_requested: list[str] = field(default_factory=list)
    retimed: list[str] = field(default_factory=list)
    # Outbox: effects decided by a committed transition and not yet known to be published.
    # Cleared after publishing; a crash in between re-publishes them (de-duplicated ids).
    outbox_requests: list[str] = field(default_factory=list)
    outbox_retimes: list[str] = field(default_factory=list)
    done: bool = False
    # Twins of earlier candidates (same normalised source): recorded, never evaluated,
    # and not counted against the budget (up to ``FREE_TWINS`` x budget of them, so a
    # synthesizer that only repeats itself still ends the search).
    duplicates: list[str] = field(default_factory=list)
    # Why the search stopped (``termination.py``); "" while it runs.
    end_reason: str = ""
    # Re-timings asked for during the search (elites before migration), beside finalists'.
    elite_retimes: list[str] = field(default_factory=list)
    # Screened nodes sent to the full protocol during the search (``tiers.py``): also
    # re-checks apart from finalists', and not counted against their budget.
    promotions: list[str] = field(default_factory=list)
    # One-line notes for the summary (e.g. the compile baseline was unavailable).
    notes: list[str] = field(default_factory=list)
    # The tuning stage has started (tune.py), and the elites whose launch-config
    # neighbours the synthesizer ran out of (apart from ``exhausted_parents``: an elite out
    # of neighbours may still have structural children, and the other way round).
    tuning: bool = False
    tune_exhausted: list[str] = field(default_factory=list)

    # -- derived ------------------------------------------------------------------

    def pending_by_request(self) -> dict[str, int]:
        """Per request: candidates asked for but neither generated nor declared exhausted yet."""
        made: dict[str, int] = {}
        for cid in self.generated:
            made[request_of(cid)] = made.get(request_of(cid), 0) + 1
        return {rid: max(0, r.count - r.exhausted - made.get(rid, 0)) for rid, r in self.requests.items()}

    def pending(self) -> int:
        return sum(self.pending_by_request().values())

    def inflight(self) -> int:
        return len(set(self.generated) - set(self.evaluated) - set(self.duplicates))

    def spent(self) -> int:
        """Generated candidates counted against the budget (free twins excluded)."""
        return len(self.generated) - min(len(set(self.duplicates)), FREE_TWINS * self.budget)

    def want(self) -> int:
        """How many more candidates to ask for now."""
        if self.done or self.cancelled or self.failure or self.finalizing:
            return 0
        room = self.max_inflight - self.inflight() - self.pending()
        left = self.budget - self.spent() - self.pending()
        return max(0, min(room, left))

    def finished(self) -> bool:
        if self.cancelled or self.failure:
            return True
        if len(self.evaluated) >= self.budget:
            return True
        return False

    def idle(self) -> bool:
        return self.inflight() == 0 and self.pending() == 0

    def retimes_pending(self) -> set[str]:
        return set(self.retime_requested) - set(self.retimed)

    # -- (de)serialisation ------------------------------------------------------------

    def to_json(self) -> bytes:
        # Not ``dataclasses.asdict``: its deep copy made every state change cost O(session
        # size) in copying alone, the largest part of a 500-candidate session's search time.
        raw = dict(vars(self))
        raw["requests"] = {k: vars(v) for k, v in self.requests.items()}
        return json.dumps(raw, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> SearchState:
        raw = json.loads(data)
        raw["requests"] = {k: RequestRecord(**v) for k, v in raw.get("requests", {}).items()}
        return cls(**raw)
