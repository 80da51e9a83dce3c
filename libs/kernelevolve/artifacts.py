"""Where a session's artifacts live in the object store: the one place that spells keys.

    <prefix>spec.py                 the operator spec as submitted
    <prefix>candidates/<cid>.py     every candidate's source
    <prefix>reports/<cid>.json      every evaluation report
    <prefix>retimes/<cid>.json      a finalist's second evaluation, in a fresh worker
    <prefix>lineage.json            the search tree: parent → child, transformation, status, fitness
    <prefix>best_kernel.py          the best correct candidate (drop-in ModelNew)
    <prefix>summary.json            the session's final summary

``prefix`` is ``sessions/<session_id>/`` on a shared store; the embedded runner roots a
folder store at the run folder and uses an empty prefix, so the run folder *is* the session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf import json_format

from kernelevolve.v1 import common_pb2 as pb


@dataclass(frozen=True)
class Artifacts:
    prefix: str

    @classmethod
    def for_session(cls, template: str, session_id: str) -> Artifacts:
        return cls(template.format(session_id=session_id))

    @property
    def spec(self) -> str:
        return f"{self.prefix}spec.py"

    def candidate(self, cid: str) -> str:
        return f"{self.prefix}candidates/{cid}.py"

    def report(self, cid: str) -> str:
        return f"{self.prefix}reports/{cid}.json"

    def llm_record(self, cid: str) -> str:
        """An LLM candidate's prompt, reply, model, tokens, latency, cost and template."""
        return f"{self.prefix}llm/{cid}.json"

    @property
    def llm_usage(self) -> str:
        """Tokens and USD an LLM synthesizer spent on the session so far."""
        return f"{self.prefix}llm/usage.json"

    def retime_report(self, cid: str) -> str:
        return f"{self.prefix}retimes/{cid}.json"

    @property
    def lineage(self) -> str:
        return f"{self.prefix}lineage.json"

    @property
    def best_kernel(self) -> str:
        return f"{self.prefix}best_kernel.py"

    @property
    def summary(self) -> str:
        return f"{self.prefix}summary.json"


def lineage_document(session_id: str, spec_name: str, nodes: list[pb.Node]) -> dict[str, Any]:
    """The content of ``lineage.json``: the same whether the search service writes it or a
    client exports a run folder through the gateway."""
    return {
        "session_id": session_id,
        "spec": spec_name,
        "nodes": [json_format.MessageToDict(n, preserving_proto_field_name=True,
                                            always_print_fields_with_no_presence=True) for n in nodes],
    }
