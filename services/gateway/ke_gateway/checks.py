"""Validation of every field of the gateway's requests, before anything is created.

Each check raises ``InvalidArgumentError`` (or ``InvalidSpecError`` for the spec) with
a message naming the field, which the error interceptor turns into INVALID_ARGUMENT.
The reference itself is run later, by an evaluator (``ValidateSpec``).
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass, field

from kernelevolve.bus.subjects import check_token
from kernelevolve.config import SearchSettings
from kernelevolve.errors import InvalidArgumentError, InvalidSpecError
from kernelevolve.ports.strategy import check_strategy_name
from kernelevolve.precision import check_name
from kernelevolve.spec import check_source
from kernelevolve.v1 import services_pb2 as spb

# More concurrent evaluations than this per session only queue up; it also bounds the
# search service's in-flight bookkeeping for one request.
MAX_INFLIGHT = 256
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class StartParams:
    name: str
    source: str
    budget: int
    strategy: str
    hardware: str
    max_inflight: int
    session_id: str  # "" = the gateway chooses one
    options: SearchOptions = field(default_factory=lambda: SearchOptions())


BASELINES = ("eager", "compile")


@dataclass(frozen=True)
class SearchOptions:
    """A session's search options, defaults applied (see ``SearchSessionDefaults``)."""

    seeds: int = 0
    time_limit_s: float = 0.0
    plateau: int = 0
    target_roofline: float = 0.0
    baseline: str = "eager"
    tune_share: float = 0.0
    tune_elite: int = 0
    precision: str = "default"


def check_search_options(req: spb.StartSessionRequest, search: SearchSettings, budget: int) -> SearchOptions:
    d = search.session
    if req.seeds < 0:
        raise InvalidArgumentError(f"seeds must be positive, got {req.seeds}")
    seeds = req.seeds or d.seeds
    if seeds > budget:
        raise InvalidArgumentError(f"seeds ({seeds}) must not exceed the budget ({budget})")
    if not (req.time_limit_s >= 0 and math.isfinite(req.time_limit_s)):
        raise InvalidArgumentError(f"time_limit_s must be a positive number of seconds, got {req.time_limit_s}")
    if req.plateau < 0:
        raise InvalidArgumentError(f"plateau must be a positive number of evaluations, got {req.plateau}")
    if not 0 <= req.target_roofline <= 1:
        raise InvalidArgumentError(f"target_roofline must be a fraction in (0, 1], got {req.target_roofline}")
    baseline = req.baseline or d.baseline
    if baseline not in BASELINES:
        raise InvalidArgumentError(f"baseline must be one of {', '.join(BASELINES)}, got {baseline!r}")
    # Set explicitly (optional fields), so that 0 can turn the tuning stage off.
    tune_share = req.tune_share if req.HasField("tune_share") else d.tune_share
    if not 0 <= tune_share < 1:
        raise InvalidArgumentError(f"tune_share must be a fraction in [0, 1), got {tune_share}")
    tune_elite = req.tune_elite if req.HasField("tune_elite") else d.tune_elite
    if tune_elite < 1:
        raise InvalidArgumentError(f"tune_elite must be at least 1, got {tune_elite}")
    precision = check_name(req.precision or d.precision)
    return SearchOptions(seeds=seeds, time_limit_s=req.time_limit_s or d.time_limit_s,
                         plateau=req.plateau or d.plateau, target_roofline=req.target_roofline or d.target_roofline,
                         baseline=baseline, tune_share=tune_share, tune_elite=tune_elite, precision=precision)


def check_start(req: spb.StartSessionRequest, search: SearchSettings, default_hardware: str) -> StartParams:
    if not req.HasField("spec"):
        raise InvalidArgumentError("spec is required")
    source = req.spec.source
    if not source.strip():
        raise InvalidSpecError("spec source is empty")
    name = req.spec.name or "operator"
    check_token(name, "spec name")
    if req.spec.sha256:
        if not _SHA256.match(req.spec.sha256):
            raise InvalidArgumentError("spec.sha256 must be 64 lowercase hex digits")
        if hashlib.sha256(source.encode()).hexdigest() != req.spec.sha256:
            raise InvalidArgumentError("spec.sha256 does not match the spec source")
    check_source(source, name)  # size limit, parses, defines Model/get_inputs/get_init_inputs
    if req.budget < 0:
        raise InvalidArgumentError(f"budget must be positive, got {req.budget}")
    budget = req.budget or search.default_budget
    if not 1 <= budget <= search.max_budget:
        raise InvalidArgumentError(f"budget must be between 1 and {search.max_budget}, got {budget}")
    strategy = req.strategy or search.strategy
    check_strategy_name(strategy)  # InvalidArgumentError naming the known strategies
    hardware = req.hardware_kind or default_hardware
    check_token(hardware, "hardware kind")
    if req.max_inflight < 0:
        raise InvalidArgumentError(f"max_inflight must be positive, got {req.max_inflight}")
    max_inflight = req.max_inflight or search.max_inflight
    if not 1 <= max_inflight <= MAX_INFLIGHT:
        raise InvalidArgumentError(f"max_inflight must be between 1 and {MAX_INFLIGHT}, got {max_inflight}")
    session_id = check_token(req.session_id, "session id") if req.session_id else ""
    options = check_search_options(req, search, budget)
    return StartParams(name, source, budget, strategy, hardware, max_inflight, session_id, options)


def check_session_id(sid: str) -> str:
    if not sid:
        raise InvalidArgumentError("session_id is required")
    return check_token(sid, "session id")


def check_candidate_id(cid: str) -> str:
    if not cid:
        raise InvalidArgumentError("candidate_id is required")
    return check_token(cid, "candidate id")


_AGENT_NAME = re.compile(r"^[\w .@:+-]{0,64}$")


def check_agent_name(name: str) -> str:
    """Who answers agent requests: shown in candidate descriptions, so short and printable."""
    if not _AGENT_NAME.match(name):
        raise InvalidArgumentError("agent name must be at most 64 letters, digits, spaces or . @ : + - _")
    return name
