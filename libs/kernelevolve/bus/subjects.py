"""Subject and key naming on the bus: the one place that spells them.

    ke.<session>.session.started      SessionStarted          gateway → search
    ke.<session>.session.cancel       SessionCancelRequested  gateway → search
    ke.<session>.session.completed    SessionCompleted        search  → gateway watchers
    ke.<session>.session.failed       SessionFailed           bus (any handler's permanent failure) → search
    ke.<session>.session.resume       SessionResumeRequested  gateway → search
    ke.<session>.request.synth        CandidateRequested      search  → synthesizer
    ke.<session>.candidate.<hw>       CandidateGenerated      synthesizer → evaluators of <hw>, search
    ke.<session>.exhausted            CandidateRequestExhausted  synthesizer → search
    ke.<session>.evaluation           EvaluationCompleted     evaluator → search, knowledge
    ke.<session>.skill                SkillDistilled          knowledge → watchers
    ke.<session>.retime.<hw>          RetimeRequested         search  → evaluators of <hw>
    ke.<session>.retimed              CandidateRetimed        evaluator → search

The session id comes second so that one filter (``ke.<session>.>``) follows a session
and one wildcard (``ke.*.candidate.<hw>``) feeds a hardware pool's work queue.
"""

from __future__ import annotations

import re

from kernelevolve.errors import InvalidArgumentError

_TOKEN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def check_token(value: str, what: str) -> str:
    if not _TOKEN.match(value):
        raise InvalidArgumentError(f"{what} {value!r} must be 1-64 letters, digits, '-' or '_'")
    return value


class Subjects:
    def __init__(self, prefix: str = "ke") -> None:
        self.prefix = prefix

    def all(self) -> str:
        return f"{self.prefix}.>"

    def session(self, sid: str) -> str:
        return f"{self.prefix}.{check_token(sid, 'session id')}.>"

    def started(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.session.started"

    def cancel(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.session.cancel"

    def resume(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.session.resume"

    def completed(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.session.completed"

    def failed(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.session.failed"

    def request(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.request.synth"

    def candidate(self, sid: str = "*", hardware: str = "*") -> str:
        return f"{self.prefix}.{sid}.candidate.{hardware}"

    def exhausted(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.exhausted"

    def evaluation(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.evaluation"

    def skill(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.skill"

    def retime(self, sid: str = "*", hardware: str = "*") -> str:
        return f"{self.prefix}.{sid}.retime.{hardware}"

    def retimed(self, sid: str = "*") -> str:
        return f"{self.prefix}.{sid}.retimed"


class Keys:
    """Key-value keys (JetStream KV allows letters, digits, '-', '_', '/', '=', '.')."""

    @staticmethod
    def session(sid: str) -> str:
        return f"session.{sid}"

    @staticmethod
    def search_state(sid: str) -> str:
        return f"search.{sid}"

    @staticmethod
    def node(sid: str, nid: str) -> str:
        return f"node.{sid}.{nid}"

    @staticmethod
    def nodes(sid: str) -> str:
        return f"node.{sid}."

    @staticmethod
    def candidate(sid: str, cid: str) -> str:
        return f"cand.{sid}.{cid}"

    @staticmethod
    def source_hash(sid: str, digest: str) -> str:
        """The first candidate of a session with this normalised-source hash."""
        return f"srchash.{sid}.{digest}"


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching: '*' is one token, '>' the rest (at least one token)."""
    p = pattern.split(".")
    s = subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s):
            return False
        if tok != "*" and tok != s[i]:
            return False
    return len(p) == len(s)
