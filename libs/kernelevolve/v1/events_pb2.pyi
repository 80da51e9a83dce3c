import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from kernelevolve.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionStarted(_message.Message):
    __slots__ = ("session",)
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.Session
    def __init__(self, session: _Optional[_Union[_common_pb2.Session, _Mapping]] = ...) -> None: ...

class CandidateRequested(_message.Message):
    __slots__ = ("session_id", "request_id", "parent_id", "count", "hardware", "tried", "repair_attempt", "tune", "precision")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    TRIED_FIELD_NUMBER: _ClassVar[int]
    REPAIR_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    TUNE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_id: str
    parent_id: str
    count: int
    hardware: _common_pb2.HardwareTarget
    tried: _containers.RepeatedCompositeFieldContainer[_common_pb2.Transformation]
    repair_attempt: int
    tune: bool
    precision: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., count: _Optional[int] = ..., hardware: _Optional[_Union[_common_pb2.HardwareTarget, _Mapping]] = ..., tried: _Optional[_Iterable[_Union[_common_pb2.Transformation, _Mapping]]] = ..., repair_attempt: _Optional[int] = ..., tune: _Optional[bool] = ..., precision: _Optional[str] = ...) -> None: ...

class CandidateGenerated(_message.Message):
    __slots__ = ("candidate", "hardware", "request_id")
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    candidate: _common_pb2.Candidate
    hardware: _common_pb2.HardwareTarget
    request_id: str
    def __init__(self, candidate: _Optional[_Union[_common_pb2.Candidate, _Mapping]] = ..., hardware: _Optional[_Union[_common_pb2.HardwareTarget, _Mapping]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CandidateRequestExhausted(_message.Message):
    __slots__ = ("session_id", "request_id", "parent_id", "reason")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    request_id: str
    parent_id: str
    reason: str
    def __init__(self, session_id: _Optional[str] = ..., request_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class EvaluationCompleted(_message.Message):
    __slots__ = ("session_id", "result")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    result: _common_pb2.EvaluationResult
    def __init__(self, session_id: _Optional[str] = ..., result: _Optional[_Union[_common_pb2.EvaluationResult, _Mapping]] = ...) -> None: ...

class SkillDistilled(_message.Message):
    __slots__ = ("session_id", "skill")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SKILL_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    skill: _common_pb2.Skill
    def __init__(self, session_id: _Optional[str] = ..., skill: _Optional[_Union[_common_pb2.Skill, _Mapping]] = ...) -> None: ...

class SessionCompleted(_message.Message):
    __slots__ = ("session", "best_source_key")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    BEST_SOURCE_KEY_FIELD_NUMBER: _ClassVar[int]
    session: _common_pb2.Session
    best_source_key: str
    def __init__(self, session: _Optional[_Union[_common_pb2.Session, _Mapping]] = ..., best_source_key: _Optional[str] = ...) -> None: ...

class RetimeRequested(_message.Message):
    __slots__ = ("session_id", "candidate", "hardware")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    candidate: _common_pb2.Candidate
    hardware: _common_pb2.HardwareTarget
    def __init__(self, session_id: _Optional[str] = ..., candidate: _Optional[_Union[_common_pb2.Candidate, _Mapping]] = ..., hardware: _Optional[_Union[_common_pb2.HardwareTarget, _Mapping]] = ...) -> None: ...

class CandidateRetimed(_message.Message):
    __slots__ = ("session_id", "result")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    result: _common_pb2.EvaluationResult
    def __init__(self, session_id: _Optional[str] = ..., result: _Optional[_Union[_common_pb2.EvaluationResult, _Mapping]] = ...) -> None: ...

class SessionCancelRequested(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class SessionResumeRequested(_message.Message):
    __slots__ = ("session_id", "budget", "attempt")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    budget: int
    attempt: int
    def __init__(self, session_id: _Optional[str] = ..., budget: _Optional[int] = ..., attempt: _Optional[int] = ...) -> None: ...

class SessionFailed(_message.Message):
    __slots__ = ("session_id", "service", "error_type", "reason", "bad_input", "failed_event_id", "failed_subject")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    ERROR_TYPE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    BAD_INPUT_FIELD_NUMBER: _ClassVar[int]
    FAILED_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FAILED_SUBJECT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    service: str
    error_type: str
    reason: str
    bad_input: bool
    failed_event_id: str
    failed_subject: str
    def __init__(self, session_id: _Optional[str] = ..., service: _Optional[str] = ..., error_type: _Optional[str] = ..., reason: _Optional[str] = ..., bad_input: _Optional[bool] = ..., failed_event_id: _Optional[str] = ..., failed_subject: _Optional[str] = ...) -> None: ...

class Envelope(_message.Message):
    __slots__ = ("event_id", "session_id", "occurred_at", "sequence", "delivery", "session_started", "candidate_requested", "candidate_generated", "candidate_request_exhausted", "evaluation_completed", "skill_distilled", "session_completed", "session_cancel_requested", "retime_requested", "candidate_retimed", "session_failed", "session_resume_requested")
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    SESSION_STARTED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_GENERATED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_REQUEST_EXHAUSTED_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SKILL_DISTILLED_FIELD_NUMBER: _ClassVar[int]
    SESSION_COMPLETED_FIELD_NUMBER: _ClassVar[int]
    SESSION_CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    RETIME_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_RETIMED_FIELD_NUMBER: _ClassVar[int]
    SESSION_FAILED_FIELD_NUMBER: _ClassVar[int]
    SESSION_RESUME_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    session_id: str
    occurred_at: _timestamp_pb2.Timestamp
    sequence: int
    delivery: int
    session_started: SessionStarted
    candidate_requested: CandidateRequested
    candidate_generated: CandidateGenerated
    candidate_request_exhausted: CandidateRequestExhausted
    evaluation_completed: EvaluationCompleted
    skill_distilled: SkillDistilled
    session_completed: SessionCompleted
    session_cancel_requested: SessionCancelRequested
    retime_requested: RetimeRequested
    candidate_retimed: CandidateRetimed
    session_failed: SessionFailed
    session_resume_requested: SessionResumeRequested
    def __init__(self, event_id: _Optional[str] = ..., session_id: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., sequence: _Optional[int] = ..., delivery: _Optional[int] = ..., session_started: _Optional[_Union[SessionStarted, _Mapping]] = ..., candidate_requested: _Optional[_Union[CandidateRequested, _Mapping]] = ..., candidate_generated: _Optional[_Union[CandidateGenerated, _Mapping]] = ..., candidate_request_exhausted: _Optional[_Union[CandidateRequestExhausted, _Mapping]] = ..., evaluation_completed: _Optional[_Union[EvaluationCompleted, _Mapping]] = ..., skill_distilled: _Optional[_Union[SkillDistilled, _Mapping]] = ..., session_completed: _Optional[_Union[SessionCompleted, _Mapping]] = ..., session_cancel_requested: _Optional[_Union[SessionCancelRequested, _Mapping]] = ..., retime_requested: _Optional[_Union[RetimeRequested, _Mapping]] = ..., candidate_retimed: _Optional[_Union[CandidateRetimed, _Mapping]] = ..., session_failed: _Optional[_Union[SessionFailed, _Mapping]] = ..., session_resume_requested: _Optional[_Union[SessionResumeRequested, _Mapping]] = ...) -> None: ...
