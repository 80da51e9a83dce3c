from kernelevolve.v1 import common_pb2 as _common_pb2
from kernelevolve.v1 import events_pb2 as _events_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AgentRequestState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGENT_REQUEST_STATE_UNSPECIFIED: _ClassVar[AgentRequestState]
    AGENT_REQUEST_STATE_OPEN: _ClassVar[AgentRequestState]
    AGENT_REQUEST_STATE_TAKEN: _ClassVar[AgentRequestState]
    AGENT_REQUEST_STATE_ANSWERED: _ClassVar[AgentRequestState]
    AGENT_REQUEST_STATE_ABANDONED: _ClassVar[AgentRequestState]
AGENT_REQUEST_STATE_UNSPECIFIED: AgentRequestState
AGENT_REQUEST_STATE_OPEN: AgentRequestState
AGENT_REQUEST_STATE_TAKEN: AgentRequestState
AGENT_REQUEST_STATE_ANSWERED: AgentRequestState
AGENT_REQUEST_STATE_ABANDONED: AgentRequestState

class StartSessionRequest(_message.Message):
    __slots__ = ("spec", "budget", "strategy", "hardware_kind", "session_id", "max_inflight", "seeds", "time_limit_s", "plateau", "target_roofline", "baseline", "tune_share", "tune_elite", "precision")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_KIND_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    PLATEAU_FIELD_NUMBER: _ClassVar[int]
    TARGET_ROOFLINE_FIELD_NUMBER: _ClassVar[int]
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    TUNE_SHARE_FIELD_NUMBER: _ClassVar[int]
    TUNE_ELITE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    spec: _common_pb2.OperatorSpec
    budget: int
    strategy: str
    hardware_kind: str
    session_id: str
    max_inflight: int
    seeds: int
    time_limit_s: float
    plateau: int
    target_roofline: float
    baseline: str
    tune_share: float
    tune_elite: int
    precision: str
    def __init__(self, spec: _Optional[_Union[_common_pb2.OperatorSpec, _Mapping]] = ..., budget: _Optional[int] = ..., strategy: _Optional[str] = ..., hardware_kind: _Optional[str] = ..., session_id: _Optional[str] = ..., max_inflight: _Optional[int] = ..., seeds: _Optional[int] = ..., time_limit_s: _Optional[float] = ..., plateau: _Optional[int] = ..., target_roofline: _Optional[float] = ..., baseline: _Optional[str] = ..., tune_share: _Optional[float] = ..., tune_elite: _Optional[int] = ..., precision: _Optional[str] = ...) -> None: ...

class StartSessionResponse(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.Session
    def __init__(self, session: _Optional[_Union[_common_pb2.Session, _Mapping]] = ...) -> None: ...

class SessionRef(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ("session_id", "from_start", "after_sequence")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_START_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    from_start: bool
    after_sequence: int
    def __init__(self, session_id: _Optional[str] = ..., from_start: _Optional[bool] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class ListCandidatesResponse(_message.Message):
    __slots__ = ("nodes",)
    NODES_FIELD_NUMBER: _ClassVar[int]
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    def __init__(self, nodes: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ...) -> None: ...

class CandidateRef(_message.Message):
    __slots__ = ("session_id", "candidate_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    candidate_id: str
    def __init__(self, session_id: _Optional[str] = ..., candidate_id: _Optional[str] = ...) -> None: ...

class GetCandidateResponse(_message.Message):
    __slots__ = ("candidate", "node", "source", "result", "report_json")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    candidate: _common_pb2.Candidate
    node: _common_pb2.Node
    source: str
    result: _common_pb2.EvaluationResult
    report_json: str
    def __init__(self, candidate: _Optional[_Union[_common_pb2.Candidate, _Mapping]] = ..., node: _Optional[_Union[_common_pb2.Node, _Mapping]] = ..., source: _Optional[str] = ..., result: _Optional[_Union[_common_pb2.EvaluationResult, _Mapping]] = ..., report_json: _Optional[str] = ...) -> None: ...

class GetReportResponse(_message.Message):
    __slots__ = ("session_id", "html")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    HTML_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    html: str
    def __init__(self, session_id: _Optional[str] = ..., html: _Optional[str] = ...) -> None: ...

class ResumeSessionRequest(_message.Message):
    __slots__ = ("session_id", "budget")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    budget: int
    def __init__(self, session_id: _Optional[str] = ..., budget: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _common_pb2.SessionStatus
    def __init__(self, status: _Optional[_Union[_common_pb2.SessionStatus, str]] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions",)
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[_common_pb2.Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_common_pb2.Session, _Mapping]]] = ...) -> None: ...

class EvaluateRequest(_message.Message):
    __slots__ = ("spec", "candidate_source", "candidate_id", "precision")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_SOURCE_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    spec: _common_pb2.OperatorSpec
    candidate_source: str
    candidate_id: str
    precision: str
    def __init__(self, spec: _Optional[_Union[_common_pb2.OperatorSpec, _Mapping]] = ..., candidate_source: _Optional[str] = ..., candidate_id: _Optional[str] = ..., precision: _Optional[str] = ...) -> None: ...

class ValidateSpecResponse(_message.Message):
    __slots__ = ("ok", "reason", "warnings", "resource_limited")
    OK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_LIMITED_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    reason: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    resource_limited: bool
    def __init__(self, ok: _Optional[bool] = ..., reason: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ..., resource_limited: _Optional[bool] = ...) -> None: ...

class AgentRequest(_message.Message):
    __slots__ = ("request_id", "slot_id", "session_id", "prompt", "spec", "parent_id", "parent_source", "state", "offer", "max_offers", "deadline", "timeout_s", "taken_by", "answered_by", "answer_source", "reason", "hardware_kind")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SLOT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFERS_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_S_FIELD_NUMBER: _ClassVar[int]
    TAKEN_BY_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_BY_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SOURCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_KIND_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    slot_id: str
    session_id: str
    prompt: str
    spec: _common_pb2.OperatorSpec
    parent_id: str
    parent_source: str
    state: AgentRequestState
    offer: int
    max_offers: int
    deadline: float
    timeout_s: float
    taken_by: str
    answered_by: str
    answer_source: str
    reason: str
    hardware_kind: str
    def __init__(self, request_id: _Optional[str] = ..., slot_id: _Optional[str] = ..., session_id: _Optional[str] = ..., prompt: _Optional[str] = ..., spec: _Optional[_Union[_common_pb2.OperatorSpec, _Mapping]] = ..., parent_id: _Optional[str] = ..., parent_source: _Optional[str] = ..., state: _Optional[_Union[AgentRequestState, str]] = ..., offer: _Optional[int] = ..., max_offers: _Optional[int] = ..., deadline: _Optional[float] = ..., timeout_s: _Optional[float] = ..., taken_by: _Optional[str] = ..., answered_by: _Optional[str] = ..., answer_source: _Optional[str] = ..., reason: _Optional[str] = ..., hardware_kind: _Optional[str] = ...) -> None: ...

class AgentNextRequest(_message.Message):
    __slots__ = ("session_id", "agent", "wait_s")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    WAIT_S_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    agent: str
    wait_s: float
    def __init__(self, session_id: _Optional[str] = ..., agent: _Optional[str] = ..., wait_s: _Optional[float] = ...) -> None: ...

class AgentSubmitRequest(_message.Message):
    __slots__ = ("request_id", "source", "agent")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    source: str
    agent: str
    def __init__(self, request_id: _Optional[str] = ..., source: _Optional[str] = ..., agent: _Optional[str] = ...) -> None: ...

class AgentSubmitResponse(_message.Message):
    __slots__ = ("request_id", "session_id", "candidate_id")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    session_id: str
    candidate_id: str
    def __init__(self, request_id: _Optional[str] = ..., session_id: _Optional[str] = ..., candidate_id: _Optional[str] = ...) -> None: ...

class ProposeRequest(_message.Message):
    __slots__ = ("spec", "request", "parent_source", "parent_result", "parent_transformation", "parent_genome", "parent_report_json", "siblings")
    class ParentGenomeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SPEC_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    PARENT_SOURCE_FIELD_NUMBER: _ClassVar[int]
    PARENT_RESULT_FIELD_NUMBER: _ClassVar[int]
    PARENT_TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    PARENT_GENOME_FIELD_NUMBER: _ClassVar[int]
    PARENT_REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    SIBLINGS_FIELD_NUMBER: _ClassVar[int]
    spec: _common_pb2.OperatorSpec
    request: _events_pb2.CandidateRequested
    parent_source: str
    parent_result: _common_pb2.EvaluationResult
    parent_transformation: _common_pb2.Transformation
    parent_genome: _containers.ScalarMap[str, str]
    parent_report_json: str
    siblings: _containers.RepeatedCompositeFieldContainer[AttemptSummary]
    def __init__(self, spec: _Optional[_Union[_common_pb2.OperatorSpec, _Mapping]] = ..., request: _Optional[_Union[_events_pb2.CandidateRequested, _Mapping]] = ..., parent_source: _Optional[str] = ..., parent_result: _Optional[_Union[_common_pb2.EvaluationResult, _Mapping]] = ..., parent_transformation: _Optional[_Union[_common_pb2.Transformation, _Mapping]] = ..., parent_genome: _Optional[_Mapping[str, str]] = ..., parent_report_json: _Optional[str] = ..., siblings: _Optional[_Iterable[_Union[AttemptSummary, _Mapping]]] = ...) -> None: ...

class AttemptSummary(_message.Message):
    __slots__ = ("candidate_id", "transformation", "status", "speedup", "reason")
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    candidate_id: str
    transformation: _common_pb2.Transformation
    status: _common_pb2.EvaluationStatus
    speedup: float
    reason: str
    def __init__(self, candidate_id: _Optional[str] = ..., transformation: _Optional[_Union[_common_pb2.Transformation, _Mapping]] = ..., status: _Optional[_Union[_common_pb2.EvaluationStatus, str]] = ..., speedup: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class Proposal(_message.Message):
    __slots__ = ("source", "transformation", "fallback_nodes", "description", "genome")
    class GenomeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_NODES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GENOME_FIELD_NUMBER: _ClassVar[int]
    source: str
    transformation: _common_pb2.Transformation
    fallback_nodes: _containers.RepeatedScalarFieldContainer[str]
    description: str
    genome: _containers.ScalarMap[str, str]
    def __init__(self, source: _Optional[str] = ..., transformation: _Optional[_Union[_common_pb2.Transformation, _Mapping]] = ..., fallback_nodes: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., genome: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ProposeResponse(_message.Message):
    __slots__ = ("proposals",)
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[Proposal]
    def __init__(self, proposals: _Optional[_Iterable[_Union[Proposal, _Mapping]]] = ...) -> None: ...

class Tree(_message.Message):
    __slots__ = ("session_id", "nodes")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NODES_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    nodes: _containers.RepeatedCompositeFieldContainer[_common_pb2.Node]
    def __init__(self, session_id: _Optional[str] = ..., nodes: _Optional[_Iterable[_Union[_common_pb2.Node, _Mapping]]] = ...) -> None: ...

class AddDocumentsRequest(_message.Message):
    __slots__ = ("documents",)
    DOCUMENTS_FIELD_NUMBER: _ClassVar[int]
    documents: _containers.RepeatedCompositeFieldContainer[_common_pb2.KnowledgeDocument]
    def __init__(self, documents: _Optional[_Iterable[_Union[_common_pb2.KnowledgeDocument, _Mapping]]] = ...) -> None: ...

class AddDocumentsResponse(_message.Message):
    __slots__ = ("added",)
    ADDED_FIELD_NUMBER: _ClassVar[int]
    added: int
    def __init__(self, added: _Optional[int] = ...) -> None: ...

class SearchKnowledgeRequest(_message.Message):
    __slots__ = ("query", "limit", "level", "hardware_kind", "op_family")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_KIND_FIELD_NUMBER: _ClassVar[int]
    OP_FAMILY_FIELD_NUMBER: _ClassVar[int]
    query: str
    limit: int
    level: _common_pb2.KnowledgeLevel
    hardware_kind: str
    op_family: str
    def __init__(self, query: _Optional[str] = ..., limit: _Optional[int] = ..., level: _Optional[_Union[_common_pb2.KnowledgeLevel, str]] = ..., hardware_kind: _Optional[str] = ..., op_family: _Optional[str] = ...) -> None: ...

class ScoredDocument(_message.Message):
    __slots__ = ("document", "score")
    DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    document: _common_pb2.KnowledgeDocument
    score: float
    def __init__(self, document: _Optional[_Union[_common_pb2.KnowledgeDocument, _Mapping]] = ..., score: _Optional[float] = ...) -> None: ...

class SearchKnowledgeResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScoredDocument]
    def __init__(self, results: _Optional[_Iterable[_Union[ScoredDocument, _Mapping]]] = ...) -> None: ...

class ListSkillsRequest(_message.Message):
    __slots__ = ("hardware_kind", "op_family", "include_retired", "limit", "precision")
    HARDWARE_KIND_FIELD_NUMBER: _ClassVar[int]
    OP_FAMILY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_RETIRED_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    hardware_kind: str
    op_family: str
    include_retired: bool
    limit: int
    precision: str
    def __init__(self, hardware_kind: _Optional[str] = ..., op_family: _Optional[str] = ..., include_retired: _Optional[bool] = ..., limit: _Optional[int] = ..., precision: _Optional[str] = ...) -> None: ...

class ListSkillsResponse(_message.Message):
    __slots__ = ("skills",)
    SKILLS_FIELD_NUMBER: _ClassVar[int]
    skills: _containers.RepeatedCompositeFieldContainer[_common_pb2.Skill]
    def __init__(self, skills: _Optional[_Iterable[_Union[_common_pb2.Skill, _Mapping]]] = ...) -> None: ...

class SkillRef(_message.Message):
    __slots__ = ("skill_id",)
    SKILL_ID_FIELD_NUMBER: _ClassVar[int]
    skill_id: str
    def __init__(self, skill_id: _Optional[str] = ...) -> None: ...

class RetireSkillRequest(_message.Message):
    __slots__ = ("skill_id", "reason")
    SKILL_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    skill_id: str
    reason: str
    def __init__(self, skill_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...
