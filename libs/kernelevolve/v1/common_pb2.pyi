import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EvaluationStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EVALUATION_STATUS_UNSPECIFIED: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_CORRECT: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_INCORRECT: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_REJECTED: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_COMPILE_ERROR: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_RUNTIME_ERROR: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_TIMEOUT: _ClassVar[EvaluationStatus]
    EVALUATION_STATUS_CRASHED: _ClassVar[EvaluationStatus]

class BoundClass(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BOUND_CLASS_UNSPECIFIED: _ClassVar[BoundClass]
    BOUND_CLASS_MEMORY: _ClassVar[BoundClass]
    BOUND_CLASS_COMPUTE: _ClassVar[BoundClass]
    BOUND_CLASS_LATENCY: _ClassVar[BoundClass]

class SessionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_STATUS_UNSPECIFIED: _ClassVar[SessionStatus]
    SESSION_STATUS_RUNNING: _ClassVar[SessionStatus]
    SESSION_STATUS_COMPLETED: _ClassVar[SessionStatus]
    SESSION_STATUS_FAILED: _ClassVar[SessionStatus]
    SESSION_STATUS_CANCELLED: _ClassVar[SessionStatus]

class KnowledgeLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KNOWLEDGE_LEVEL_UNSPECIFIED: _ClassVar[KnowledgeLevel]
    KNOWLEDGE_LEVEL_GUIDANCE: _ClassVar[KnowledgeLevel]
    KNOWLEDGE_LEVEL_HARDWARE: _ClassVar[KnowledgeLevel]
    KNOWLEDGE_LEVEL_OP_PATTERN: _ClassVar[KnowledgeLevel]
    KNOWLEDGE_LEVEL_SKILL: _ClassVar[KnowledgeLevel]
EVALUATION_STATUS_UNSPECIFIED: EvaluationStatus
EVALUATION_STATUS_CORRECT: EvaluationStatus
EVALUATION_STATUS_INCORRECT: EvaluationStatus
EVALUATION_STATUS_REJECTED: EvaluationStatus
EVALUATION_STATUS_COMPILE_ERROR: EvaluationStatus
EVALUATION_STATUS_RUNTIME_ERROR: EvaluationStatus
EVALUATION_STATUS_TIMEOUT: EvaluationStatus
EVALUATION_STATUS_CRASHED: EvaluationStatus
BOUND_CLASS_UNSPECIFIED: BoundClass
BOUND_CLASS_MEMORY: BoundClass
BOUND_CLASS_COMPUTE: BoundClass
BOUND_CLASS_LATENCY: BoundClass
SESSION_STATUS_UNSPECIFIED: SessionStatus
SESSION_STATUS_RUNNING: SessionStatus
SESSION_STATUS_COMPLETED: SessionStatus
SESSION_STATUS_FAILED: SessionStatus
SESSION_STATUS_CANCELLED: SessionStatus
KNOWLEDGE_LEVEL_UNSPECIFIED: KnowledgeLevel
KNOWLEDGE_LEVEL_GUIDANCE: KnowledgeLevel
KNOWLEDGE_LEVEL_HARDWARE: KnowledgeLevel
KNOWLEDGE_LEVEL_OP_PATTERN: KnowledgeLevel
KNOWLEDGE_LEVEL_SKILL: KnowledgeLevel

class OperatorSpec(_message.Message):
    __slots__ = ("name", "source", "sha256")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    name: str
    source: str
    sha256: str
    def __init__(self, name: _Optional[str] = ..., source: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class HardwareTarget(_message.Message):
    __slots__ = ("kind", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Transformation(_message.Message):
    __slots__ = ("name", "params")
    class ParamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    name: str
    params: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., params: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("candidate_id", "session_id", "parent_id", "transformation", "source_key", "source_sha256", "synthesizer", "created_at", "fallback_nodes", "description", "genome", "duplicate_of")
    class GenomeEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_KEY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SHA256_FIELD_NUMBER: _ClassVar[int]
    SYNTHESIZER_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_NODES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    GENOME_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_OF_FIELD_NUMBER: _ClassVar[int]
    candidate_id: str
    session_id: str
    parent_id: str
    transformation: Transformation
    source_key: str
    source_sha256: str
    synthesizer: str
    created_at: _timestamp_pb2.Timestamp
    fallback_nodes: _containers.RepeatedScalarFieldContainer[str]
    description: str
    genome: _containers.ScalarMap[str, str]
    duplicate_of: str
    def __init__(self, candidate_id: _Optional[str] = ..., session_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., transformation: _Optional[_Union[Transformation, _Mapping]] = ..., source_key: _Optional[str] = ..., source_sha256: _Optional[str] = ..., synthesizer: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., fallback_nodes: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., genome: _Optional[_Mapping[str, str]] = ..., duplicate_of: _Optional[str] = ...) -> None: ...

class TimingStats(_message.Message):
    __slots__ = ("median_ms", "iqr_ms", "ci_low_ms", "ci_high_ms", "trials", "min_ms", "device_median_ms", "host_median_ms", "per_call_median_ms")
    MEDIAN_MS_FIELD_NUMBER: _ClassVar[int]
    IQR_MS_FIELD_NUMBER: _ClassVar[int]
    CI_LOW_MS_FIELD_NUMBER: _ClassVar[int]
    CI_HIGH_MS_FIELD_NUMBER: _ClassVar[int]
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    MIN_MS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_MEDIAN_MS_FIELD_NUMBER: _ClassVar[int]
    HOST_MEDIAN_MS_FIELD_NUMBER: _ClassVar[int]
    PER_CALL_MEDIAN_MS_FIELD_NUMBER: _ClassVar[int]
    median_ms: float
    iqr_ms: float
    ci_low_ms: float
    ci_high_ms: float
    trials: int
    min_ms: float
    device_median_ms: float
    host_median_ms: float
    per_call_median_ms: float
    def __init__(self, median_ms: _Optional[float] = ..., iqr_ms: _Optional[float] = ..., ci_low_ms: _Optional[float] = ..., ci_high_ms: _Optional[float] = ..., trials: _Optional[int] = ..., min_ms: _Optional[float] = ..., device_median_ms: _Optional[float] = ..., host_median_ms: _Optional[float] = ..., per_call_median_ms: _Optional[float] = ...) -> None: ...

class CorrectnessStats(_message.Message):
    __slots__ = ("trials", "max_abs_error", "max_rel_error", "atol", "rtol", "bound", "candidate_error", "reference_error", "error_ratio", "outliers")
    TRIALS_FIELD_NUMBER: _ClassVar[int]
    MAX_ABS_ERROR_FIELD_NUMBER: _ClassVar[int]
    MAX_REL_ERROR_FIELD_NUMBER: _ClassVar[int]
    ATOL_FIELD_NUMBER: _ClassVar[int]
    RTOL_FIELD_NUMBER: _ClassVar[int]
    BOUND_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_ERROR_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_ERROR_FIELD_NUMBER: _ClassVar[int]
    ERROR_RATIO_FIELD_NUMBER: _ClassVar[int]
    OUTLIERS_FIELD_NUMBER: _ClassVar[int]
    trials: int
    max_abs_error: float
    max_rel_error: float
    atol: float
    rtol: float
    bound: str
    candidate_error: float
    reference_error: float
    error_ratio: float
    outliers: int
    def __init__(self, trials: _Optional[int] = ..., max_abs_error: _Optional[float] = ..., max_rel_error: _Optional[float] = ..., atol: _Optional[float] = ..., rtol: _Optional[float] = ..., bound: _Optional[str] = ..., candidate_error: _Optional[float] = ..., reference_error: _Optional[float] = ..., error_ratio: _Optional[float] = ..., outliers: _Optional[int] = ...) -> None: ...

class KernelStat(_message.Message):
    __slots__ = ("name", "launches", "time_ms", "registers", "shared_bytes", "spills")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LAUNCHES_FIELD_NUMBER: _ClassVar[int]
    TIME_MS_FIELD_NUMBER: _ClassVar[int]
    REGISTERS_FIELD_NUMBER: _ClassVar[int]
    SHARED_BYTES_FIELD_NUMBER: _ClassVar[int]
    SPILLS_FIELD_NUMBER: _ClassVar[int]
    name: str
    launches: int
    time_ms: float
    registers: int
    shared_bytes: int
    spills: int
    def __init__(self, name: _Optional[str] = ..., launches: _Optional[int] = ..., time_ms: _Optional[float] = ..., registers: _Optional[int] = ..., shared_bytes: _Optional[int] = ..., spills: _Optional[int] = ...) -> None: ...

class Diagnosis(_message.Message):
    __slots__ = ("bound", "bytes_moved", "flops", "achieved_gbps", "achieved_gflops", "roofline_fraction", "library_time_fraction", "kernels", "notes")
    BOUND_FIELD_NUMBER: _ClassVar[int]
    BYTES_MOVED_FIELD_NUMBER: _ClassVar[int]
    FLOPS_FIELD_NUMBER: _ClassVar[int]
    ACHIEVED_GBPS_FIELD_NUMBER: _ClassVar[int]
    ACHIEVED_GFLOPS_FIELD_NUMBER: _ClassVar[int]
    ROOFLINE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    LIBRARY_TIME_FRACTION_FIELD_NUMBER: _ClassVar[int]
    KERNELS_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    bound: BoundClass
    bytes_moved: float
    flops: float
    achieved_gbps: float
    achieved_gflops: float
    roofline_fraction: float
    library_time_fraction: float
    kernels: _containers.RepeatedCompositeFieldContainer[KernelStat]
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, bound: _Optional[_Union[BoundClass, str]] = ..., bytes_moved: _Optional[float] = ..., flops: _Optional[float] = ..., achieved_gbps: _Optional[float] = ..., achieved_gflops: _Optional[float] = ..., roofline_fraction: _Optional[float] = ..., library_time_fraction: _Optional[float] = ..., kernels: _Optional[_Iterable[_Union[KernelStat, _Mapping]]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class EvaluationResult(_message.Message):
    __slots__ = ("candidate_id", "status", "reason", "correctness", "candidate_timing", "baseline_timing", "speedup", "diagnosis", "report_key", "hardware", "fingerprint", "interpreted", "warnings", "interrupted_attempts", "speedup_vs_compile", "compile_baseline_note", "precision", "tier")
    class FingerprintEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CORRECTNESS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_TIMING_FIELD_NUMBER: _ClassVar[int]
    BASELINE_TIMING_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSIS_FIELD_NUMBER: _ClassVar[int]
    REPORT_KEY_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    INTERPRETED_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    SPEEDUP_VS_COMPILE_FIELD_NUMBER: _ClassVar[int]
    COMPILE_BASELINE_NOTE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    candidate_id: str
    status: EvaluationStatus
    reason: str
    correctness: CorrectnessStats
    candidate_timing: TimingStats
    baseline_timing: TimingStats
    speedup: float
    diagnosis: Diagnosis
    report_key: str
    hardware: HardwareTarget
    fingerprint: _containers.ScalarMap[str, str]
    interpreted: bool
    warnings: _containers.RepeatedScalarFieldContainer[str]
    interrupted_attempts: int
    speedup_vs_compile: float
    compile_baseline_note: str
    precision: PrecisionContract
    tier: str
    def __init__(self, candidate_id: _Optional[str] = ..., status: _Optional[_Union[EvaluationStatus, str]] = ..., reason: _Optional[str] = ..., correctness: _Optional[_Union[CorrectnessStats, _Mapping]] = ..., candidate_timing: _Optional[_Union[TimingStats, _Mapping]] = ..., baseline_timing: _Optional[_Union[TimingStats, _Mapping]] = ..., speedup: _Optional[float] = ..., diagnosis: _Optional[_Union[Diagnosis, _Mapping]] = ..., report_key: _Optional[str] = ..., hardware: _Optional[_Union[HardwareTarget, _Mapping]] = ..., fingerprint: _Optional[_Mapping[str, str]] = ..., interpreted: _Optional[bool] = ..., warnings: _Optional[_Iterable[str]] = ..., interrupted_attempts: _Optional[int] = ..., speedup_vs_compile: _Optional[float] = ..., compile_baseline_note: _Optional[str] = ..., precision: _Optional[_Union[PrecisionContract, _Mapping]] = ..., tier: _Optional[str] = ...) -> None: ...

class PrecisionContract(_message.Message):
    __slots__ = ("name", "flags", "spec_flags")
    class FlagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SpecFlagsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    SPEC_FLAGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    flags: _containers.ScalarMap[str, str]
    spec_flags: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., flags: _Optional[_Mapping[str, str]] = ..., spec_flags: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("node_id", "parent_id", "transformation", "status", "fitness", "buggy", "evaluated", "depth", "source_key", "report_key", "reason", "retimed", "first_fitness", "interrupted_evaluations", "fitness_low", "fitness_high", "roofline_fraction", "duplicate_of", "tier")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FITNESS_FIELD_NUMBER: _ClassVar[int]
    BUGGY_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    SOURCE_KEY_FIELD_NUMBER: _ClassVar[int]
    REPORT_KEY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RETIMED_FIELD_NUMBER: _ClassVar[int]
    FIRST_FITNESS_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    FITNESS_LOW_FIELD_NUMBER: _ClassVar[int]
    FITNESS_HIGH_FIELD_NUMBER: _ClassVar[int]
    ROOFLINE_FRACTION_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_OF_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    parent_id: str
    transformation: Transformation
    status: EvaluationStatus
    fitness: float
    buggy: bool
    evaluated: bool
    depth: int
    source_key: str
    report_key: str
    reason: str
    retimed: bool
    first_fitness: float
    interrupted_evaluations: int
    fitness_low: float
    fitness_high: float
    roofline_fraction: float
    duplicate_of: str
    tier: str
    def __init__(self, node_id: _Optional[str] = ..., parent_id: _Optional[str] = ..., transformation: _Optional[_Union[Transformation, _Mapping]] = ..., status: _Optional[_Union[EvaluationStatus, str]] = ..., fitness: _Optional[float] = ..., buggy: _Optional[bool] = ..., evaluated: _Optional[bool] = ..., depth: _Optional[int] = ..., source_key: _Optional[str] = ..., report_key: _Optional[str] = ..., reason: _Optional[str] = ..., retimed: _Optional[bool] = ..., first_fitness: _Optional[float] = ..., interrupted_evaluations: _Optional[int] = ..., fitness_low: _Optional[float] = ..., fitness_high: _Optional[float] = ..., roofline_fraction: _Optional[float] = ..., duplicate_of: _Optional[str] = ..., tier: _Optional[str] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ("session_id", "spec", "hardware", "budget", "strategy", "status", "generated", "evaluated", "best_candidate_id", "best_speedup", "created_at", "finished_at", "error", "artifact_prefix", "max_inflight", "bad_input", "common_failure", "resumes", "seeds", "time_limit_s", "plateau", "target_roofline", "baseline", "end_reason", "tune_share", "tune_elite", "precision")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GENERATED_FIELD_NUMBER: _ClassVar[int]
    EVALUATED_FIELD_NUMBER: _ClassVar[int]
    BEST_CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    BEST_SPEEDUP_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_PREFIX_FIELD_NUMBER: _ClassVar[int]
    MAX_INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    BAD_INPUT_FIELD_NUMBER: _ClassVar[int]
    COMMON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    RESUMES_FIELD_NUMBER: _ClassVar[int]
    SEEDS_FIELD_NUMBER: _ClassVar[int]
    TIME_LIMIT_S_FIELD_NUMBER: _ClassVar[int]
    PLATEAU_FIELD_NUMBER: _ClassVar[int]
    TARGET_ROOFLINE_FIELD_NUMBER: _ClassVar[int]
    BASELINE_FIELD_NUMBER: _ClassVar[int]
    END_REASON_FIELD_NUMBER: _ClassVar[int]
    TUNE_SHARE_FIELD_NUMBER: _ClassVar[int]
    TUNE_ELITE_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    spec: OperatorSpec
    hardware: HardwareTarget
    budget: int
    strategy: str
    status: SessionStatus
    generated: int
    evaluated: int
    best_candidate_id: str
    best_speedup: float
    created_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    error: str
    artifact_prefix: str
    max_inflight: int
    bad_input: bool
    common_failure: str
    resumes: int
    seeds: int
    time_limit_s: float
    plateau: int
    target_roofline: float
    baseline: str
    end_reason: str
    tune_share: float
    tune_elite: int
    precision: str
    def __init__(self, session_id: _Optional[str] = ..., spec: _Optional[_Union[OperatorSpec, _Mapping]] = ..., hardware: _Optional[_Union[HardwareTarget, _Mapping]] = ..., budget: _Optional[int] = ..., strategy: _Optional[str] = ..., status: _Optional[_Union[SessionStatus, str]] = ..., generated: _Optional[int] = ..., evaluated: _Optional[int] = ..., best_candidate_id: _Optional[str] = ..., best_speedup: _Optional[float] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., error: _Optional[str] = ..., artifact_prefix: _Optional[str] = ..., max_inflight: _Optional[int] = ..., bad_input: _Optional[bool] = ..., common_failure: _Optional[str] = ..., resumes: _Optional[int] = ..., seeds: _Optional[int] = ..., time_limit_s: _Optional[float] = ..., plateau: _Optional[int] = ..., target_roofline: _Optional[float] = ..., baseline: _Optional[str] = ..., end_reason: _Optional[str] = ..., tune_share: _Optional[float] = ..., tune_elite: _Optional[int] = ..., precision: _Optional[str] = ...) -> None: ...

class Skill(_message.Message):
    __slots__ = ("skill_id", "title", "text", "op_pattern", "hardware_kind", "source_session_id", "source_candidate_id", "detail")
    SKILL_ID_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    OP_PATTERN_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_KIND_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_CANDIDATE_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    skill_id: str
    title: str
    text: str
    op_pattern: str
    hardware_kind: str
    source_session_id: str
    source_candidate_id: str
    detail: SkillDetail
    def __init__(self, skill_id: _Optional[str] = ..., title: _Optional[str] = ..., text: _Optional[str] = ..., op_pattern: _Optional[str] = ..., hardware_kind: _Optional[str] = ..., source_session_id: _Optional[str] = ..., source_candidate_id: _Optional[str] = ..., detail: _Optional[_Union[SkillDetail, _Mapping]] = ...) -> None: ...

class SkillDetail(_message.Message):
    __slots__ = ("transformation", "op_family", "shape_class", "dtype", "gain", "gain_low", "gain_high", "before", "after", "provenance", "status", "status_reason", "confirmations", "failures", "precision")
    class ProvenanceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TRANSFORMATION_FIELD_NUMBER: _ClassVar[int]
    OP_FAMILY_FIELD_NUMBER: _ClassVar[int]
    SHAPE_CLASS_FIELD_NUMBER: _ClassVar[int]
    DTYPE_FIELD_NUMBER: _ClassVar[int]
    GAIN_FIELD_NUMBER: _ClassVar[int]
    GAIN_LOW_FIELD_NUMBER: _ClassVar[int]
    GAIN_HIGH_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATIONS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    transformation: Transformation
    op_family: str
    shape_class: str
    dtype: str
    gain: float
    gain_low: float
    gain_high: float
    before: str
    after: str
    provenance: _containers.ScalarMap[str, str]
    status: str
    status_reason: str
    confirmations: int
    failures: int
    precision: str
    def __init__(self, transformation: _Optional[_Union[Transformation, _Mapping]] = ..., op_family: _Optional[str] = ..., shape_class: _Optional[str] = ..., dtype: _Optional[str] = ..., gain: _Optional[float] = ..., gain_low: _Optional[float] = ..., gain_high: _Optional[float] = ..., before: _Optional[str] = ..., after: _Optional[str] = ..., provenance: _Optional[_Mapping[str, str]] = ..., status: _Optional[str] = ..., status_reason: _Optional[str] = ..., confirmations: _Optional[int] = ..., failures: _Optional[int] = ..., precision: _Optional[str] = ...) -> None: ...

class KnowledgeDocument(_message.Message):
    __slots__ = ("doc_id", "level", "title", "text", "tags", "hardware_kind", "op_family")
    DOC_ID_FIELD_NUMBER: _ClassVar[int]
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    HARDWARE_KIND_FIELD_NUMBER: _ClassVar[int]
    OP_FAMILY_FIELD_NUMBER: _ClassVar[int]
    doc_id: str
    level: KnowledgeLevel
    title: str
    text: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    hardware_kind: str
    op_family: str
    def __init__(self, doc_id: _Optional[str] = ..., level: _Optional[_Union[KnowledgeLevel, str]] = ..., title: _Optional[str] = ..., text: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., hardware_kind: _Optional[str] = ..., op_family: _Optional[str] = ...) -> None: ...
