"""Typed configuration, read once at start-up by each entrypoint.

Sources, later wins: defaults → YAML file (``KE_CONFIG`` or ``--config``) → environment
variables ``KE_<SECTION>_<FIELD>`` (e.g. ``KE_BUS_URL``, ``KE_STORE_KIND``); ``OPENAI_BASE_URL``
stands in for an unset ``llm.base_url`` (see ``LlmSettings``). Sections nest:
a section inside a section adds its name, ``KE_<SECTION>_<SUBSECTION>_<FIELD>`` (e.g.
``KE_EVALUATOR_TIMING_MAX_TRIALS`` for ``evaluator: {timing: {max_trials: ...}}``). A field
that may be None (``int | None``) takes ``none``/``null`` or an empty value for None.
``${VAR}`` inside YAML values is expanded from the environment and fails loudly when
``VAR`` is unset. Secrets (S3 keys, gateway tokens) come only from the environment / a
Kubernetes Secret mounted as environment.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

import yaml

from kernelevolve.errors import ConfigError


@dataclass(frozen=True)
class BusSettings:
    # Empty url: the embedded runner starts its own nats-server and fills this in.
    url: str = ""
    subject_prefix: str = "ke"
    stream: str = "KE"
    kv_bucket: str = "ke_state"
    connect_timeout_s: float = 5.0
    # Events are kept this long in the stream (seconds); 7 days.
    max_age_s: int = 7 * 24 * 3600
    # How long a consumer's unacknowledged message waits before it is redelivered when its
    # handler's process died; a live handler sends progress heartbeats, so this bounds only
    # crash recovery. Consumers may ask for their own (the evaluator has evaluator.ack_wait_s).
    ack_wait_s: float = 30.0


@dataclass(frozen=True)
class StoreSettings:
    kind: str = "folder"  # "folder" | "s3"
    root: str = "runs"  # folder store root
    endpoint: str = ""  # s3: host:port
    bucket: str = "kernelevolve"
    access_key: str = ""
    secret_key: str = ""
    secure: bool = False
    region: str = ""
    # Key prefix of one session's artifacts; "{session_id}" is substituted.
    session_prefix: str = "sessions/{session_id}/"


@dataclass(frozen=True)
class KnowledgeSettings:
    path: str = ""  # Qdrant local mode folder; used when url is empty
    url: str = ""  # Qdrant server url
    api_key: str = ""
    collection: str = "kernelevolve"
    # "minilm" (all-MiniLM-L6-v2, offline package) or "hash" (no model; tests/tiny installs)
    embedder: str = "minilm"


# -- evaluator sections: shared by EvaluatorSettings and the Judge's own options --------------
# ``ke_evaluator.judge.EvalOptions`` embeds these same classes, so a default is written once
# and ``ke_evaluator.judge.options_from_settings`` hands them over unchanged.


@dataclass(frozen=True)
class TimingOptions:
    """How candidates are timed against the eager reference (``KE_EVALUATOR_TIMING_*``)."""

    # Rounds per timing; None picks the device default (CPU interpreter 3..10, CUDA 10..200).
    min_trials: int | None = None
    max_trials: int | None = None
    ci_target: float = 0.02  # stop when the median's 95% CI is within +-2%
    budget_s: float = 30.0
    input_sets: int = 3  # rotating input sets with distinct buffers
    # GPU only: also time torch.compile of the reference (verdict.compile_baseline_timing).
    compile_baseline: bool = False


@dataclass(frozen=True)
class ReferenceCacheOptions:
    """Each worker's cache of inputs and reference outputs (``KE_EVALUATOR_CACHE_*``)."""

    # A byte cap; None = ``fraction`` of free device memory split over the workers (CUDA) or
    # 256 MiB (CPU); 0 = off (seeds random per evaluation again).
    limit_bytes: int | None = None
    fraction: float = 0.25
    # Consecutive evaluations of a spec in one worker that share a derived seed (and so
    # the cached sets) before the seed rotates.
    seed_rotation_jobs: int = 8


@dataclass(frozen=True)
class SandboxOptions:
    """Limits and isolation of every worker process (``KE_EVALUATOR_SANDBOX_*``)."""

    startup_timeout_s: float = 180.0
    memory_limit_bytes: int | None = 16 * 2**30  # RLIMIT_AS, CPU only (CUDA maps huge VA ranges)
    file_size_limit_bytes: int = 256 * 2**20
    network_isolation: bool = True
    filesystem_isolation: bool = True  # private mount namespace: all read-only but scratch + Triton cache
    cuda_visible_devices: str | None = None  # pin the worker's GPU; None keeps the parent's value


@dataclass(frozen=True)
class WorkerPoolOptions:
    """When workers are kept, replaced and pre-started (``KE_EVALUATOR_POOL_*``)."""

    # Worker reuse after a non-correct verdict. True keeps the worker after incorrect /
    # compile_error (and CPU runtime_error); False replaces it after any. None (default):
    # True on CUDA, False on CPU. In the interpreter an unmasked out-of-bounds access can
    # corrupt the worker's own heap, so an incorrect answer there may be a symptom. On a GPU
    # the same bug lands in device memory: either a CUDA error (runtime_error, always
    # replaced) or a silent write, which the reference cache's checksums and the integrity
    # snapshot catch for the next job as they do after a correct one. A replacement there
    # costs a new spare's CUDA start-up under the shared device lock and the worker's
    # reference cache (6 of 24 jobs in bench/eval_throughput.py's mix).
    reuse_worker_after_failure: bool | None = None
    max_jobs_per_worker: int = 50
    # Once a worker has been replaced, keep a pre-started spare (never given a job) so the
    # next replacement is instant. Starting a worker (torch import + CUDA init) took ~3 s
    # and was most of the judge's wall time on an H100 when failures were frequent
    # (bench/RESULTS.md). Costs one idle process (and a CUDA context) while it waits.
    spare_worker: bool = True
    # Start the spare with the first worker instead of after the first replacement. None:
    # on CUDA only. An H100 run waited ~10 s for a worker after its first failure, 14% of
    # the run (bench/results/eval_throughput.json); on a small CPU host the idle torch
    # import would compete with the work.
    spare_from_start: bool | None = None
    # Longest wait for the device lock before a job is given up (the wait itself does not
    # count against compile/run timeouts). None: every other worker's limits added up.
    lock_wait_timeout_s: float | None = None
    # Device-memory admission (CUDA): jobs sharing a GPU are admitted only while their
    # specs' measured footprints, times ``memory_margin``, fit the memory free when the GPU
    # was idle; a spec's first job and any larger than the GPU run alone; an
    # out-of-memory error while sharing is re-run alone (ke_evaluator README, "Memory").
    # Without it 67 of 239 real-size operators ran out of memory on an H100 with 8 workers.
    memory_admission: bool = True
    # Factor on a footprint for what differs between candidates of a spec. The measured job
    # peak already holds one candidate's outputs and temporaries beside several copies of an
    # input set (the cached set, the candidate's clone, the reference's clone) and the
    # reference's outputs; 1.5 leaves room for a candidate that keeps one more copy of the
    # largest of them (a transposed weight, split-K partials) plus the caching allocator's
    # rounding (2 MiB pages, 20 MiB segments).
    memory_margin: float = 1.5


@dataclass(frozen=True)
class EvaluatorSettings:
    # Hardware kind this evaluator serves; "auto": "nvidia" when CUDA is visible ("amd" on
    # torch's ROCm build), else "cpu". It picks the evaluator's device backend: nvidia[-*]
    # -> cuda, amd[-*] -> rocm, cpu/x86 -> the interpreter, any other kind a CPU pool label.
    hardware_kind: str = "auto"
    compile_timeout_s: float = 120.0
    run_timeout_s: float = 120.0
    # The limits of a job grow with its spec's measured reference cost: by this factor
    # times the reference's seconds of the protocol's work (a candidate may be that many
    # times slower than the reference), up to run_timeout_max_s. 0: fixed limits. At real
    # sizes the protocol outlasted 120 s for the reference alone (ke_evaluator README,
    # "Phase limits").
    run_timeout_max_s: float = 1800.0
    reference_cost_factor: float = 4.0
    # Seconds a spec validation waits for the spec's import (its module-level code): past
    # it the spec is rejected (exit 2). Spec imports measured at 0.7 ms median, 13 ms at
    # most over the examples, `import transformers` 2.3 s (2 shared cores): 60 s cuts no
    # slow legitimate import and ends a hanging one well inside the 240 s a session start
    # waits (gateway.validate_timeout_s).
    spec_import_timeout_s: float = 60.0
    # What the CPU interpreter judges at a spec's own size (kernelevolve.spec_shrink.
    # ShrinkBudget): a larger spec is judged at shrunk shapes, or refused (exit 3) when no
    # shrink keeps its model. The examples stay under both (their inputs 2**17-2**18
    # elements, a whole model's forward well under a GFLOP).
    interpreter_max_flops: float = 2.5e8
    interpreter_max_input_bytes: int = 4 * 2**20
    correctness_trials: int = 5
    # The precision contract of a job that names none (``kernelevolve eval``; a session
    # names its own): default | strict | tf32 (kernelevolve.precision).
    precision: str = "default"
    scratch_dir: str = ""
    # Candidates judged at once on this evaluator's device: the Judge keeps this many
    # sandboxed workers; checks overlap, timing takes the device alone (exclusive lock).
    # 1 on CPU (the interpreter is CPU-bound); 2-4 pays off on a GPU, where compile and
    # correctness leave it mostly idle (bench/eval_throughput.py --parallel N).
    parallel_workers: int = 1
    timing: TimingOptions = field(default_factory=TimingOptions)
    cache: ReferenceCacheOptions = field(default_factory=ReferenceCacheOptions)
    sandbox: SandboxOptions = field(default_factory=SandboxOptions)
    pool: WorkerPoolOptions = field(default_factory=WorkerPoolOptions)
    # A candidate whose evaluation was started this many times without a verdict (its
    # evaluator died each time) is judged ``crashed`` on the next delivery instead of
    # blocking the work queue; the consumer allows max_attempts + 1 deliveries.
    max_attempts: int = 2
    # GPUs of this host the evaluator judges on (nvidia only), one worker pinned to each
    # (CUDA_VISIBLE_DEVICES per worker process): "" the first visible GPU, "all" every
    # visible one, or a list of CUDA_VISIBLE_DEVICES entries ("0,2").
    gpus: str = ""
    # How long a silent evaluator keeps a candidate before it is redelivered to another;
    # a live one extends it with progress heartbeats, so this bounds only crash recovery.
    ack_wait_s: float = 60.0
    # True: a candidate is screened first (one input set against the cached eager output,
    # a short timing: ke_evaluator/worker/stages) and the full protocol judges the ones the
    # search promotes (its contenders and finalists, through a re-check in a fresh worker).
    # A screened verdict is provisional: never called best, distilled or reported alone.
    screen: bool = True


@dataclass(frozen=True)
class SearchSettings:
    strategy: str = "greedy"
    default_budget: int = 8
    max_inflight: int = 2
    max_budget: int = 10000
    # Finalists judged again in a fresh worker before one is called best (0: none).
    finalists: int = 1
    # At most this many re-timings per session (a re-timed finalist may drop below another).
    max_retimes: int = 3
    # With a screening evaluator (evaluator.screen): screened contenders (within the timing
    # noise of the best) sent to the full protocol during a session, beside its finalists.
    max_promotions: int = 16
    # Defaults of the per-session search options (StartSessionRequest, ``optimize`` flags).
    session: SearchSessionDefaults = field(default_factory=lambda: SearchSessionDefaults())


@dataclass(frozen=True)
class SynthesizerSettings:
    kind: str = "offline"  # a name of ke_synthesizer.registry: offline, llm, offline+llm
    # Unused by the LLM synthesizer, which reads its key from the environment or a Secret
    # file (LlmSettings.api_key_env), so that the key never becomes part of the settings.
    api_key: str = ""
    # The offline synthesizer's measured impl choices (JSON; ke_synthesizer.offline.families.
    # impl_policy.ImplCache): per conv / matmul shape and device, Triton kernel or library
    # call for the seed. Empty or a missing file: the heuristic alone (KE_SYNTHESIZER_IMPL_CACHE).
    impl_cache: str = ""


@dataclass(frozen=True)
class GrpcSettings:
    host: str = "127.0.0.1"
    gateway_port: int = 50051
    search_port: int = 50052
    synthesizer_port: int = 50053
    evaluator_port: int = 50054
    knowledge_port: int = 50055
    # Where the gateway reaches the evaluator for ValidateSpec ("host:port").
    evaluator_target: str = ""
    # Largest request a server accepts (bytes); a spec is source text, so 8 MiB is generous.
    max_message_bytes: int = 8 * 1024 * 1024


@dataclass(frozen=True)
class AuthSettings:
    # Bearer tokens every gRPC server accepts, comma-separated; empty = no authentication
    # (the embedded default, which listens on loopback only). A secret: set it from the
    # environment (KE_AUTH_TOKENS, from a Kubernetes Secret) or a ${VAR} in the YAML.
    # Internal calls (gateway -> evaluator) send the first one.
    tokens: str = ""

    @property
    def token_list(self) -> tuple[str, ...]:
        return tuple(t.strip() for t in self.tokens.split(",") if t.strip())


@dataclass(frozen=True)
class GatewaySettings:
    # TLS for the public endpoint (PEM files, e.g. a mounted kubernetes.io/tls Secret);
    # both empty = plaintext. Internal services stay plaintext inside the namespace.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    # Token bucket per client (token, or peer address without one): sustained calls per
    # second and burst. A watcher's stream counts as one call.
    rate_per_s: float = 20.0
    rate_burst: int = 40
    # StartSession waits at most this long for spec validation when the caller set no deadline.
    validate_timeout_s: float = 240.0


@dataclass(frozen=True)
class ClientSettings:
    # What the CLI and the Python client send to a gateway: KE_CLIENT_TOKEN (never in YAML
    # committed anywhere), TLS on/off and the CA bundle that signed the gateway's certificate
    # (empty: the system roots).
    token: str = ""
    tls: bool = False
    tls_ca_file: str = ""


@dataclass(frozen=True)
class MetricsSettings:
    # Prometheus endpoint (/metrics over HTTP) of a standalone service, bound on grpc.host.
    # Port 0 with enabled=true binds a free port (tests).
    enabled: bool = False
    port: int = 9100


@dataclass(frozen=True)
class ClusterSettings:
    # State folder of `kernelevolve up` (pids, ports, the generated token, logs);
    # empty = $XDG_STATE_HOME/kernelevolve/cluster (~/.local/state/... without it).
    state_dir: str = ""


@dataclass(frozen=True)
class AgentSettings:
    # The `agent` synthesizer (`--synthesizer agent`): requests answered by an external
    # coding agent or a person through `kernelevolve agent next/submit` or the gateway.
    # Seconds an offer stays open (and an answerer holds a taken one) before it is re-offered.
    timeout_s: float = 600.0
    # Offers per request before its node is abandoned.
    max_offers: int = 3
    # How often a waiting synthesizer looks at its requests in the ledger (seconds).
    poll_s: float = 0.25
    # Requests waited for at once (all sessions together): one slow answer holds up no other.
    concurrency: int = 32
    # Longest AgentNext wait the gateway grants one call (seconds).
    max_wait_s: float = 30.0


@dataclass(frozen=True)
class Settings:
    bus: BusSettings = field(default_factory=BusSettings)
    store: StoreSettings = field(default_factory=StoreSettings)
    knowledge: KnowledgeSettings = field(default_factory=KnowledgeSettings)
    evaluator: EvaluatorSettings = field(default_factory=EvaluatorSettings)
    search: SearchSettings = field(default_factory=SearchSettings)
    synthesizer: SynthesizerSettings = field(default_factory=SynthesizerSettings)
    grpc: GrpcSettings = field(default_factory=GrpcSettings)
    auth: AuthSettings = field(default_factory=AuthSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    client: ClientSettings = field(default_factory=ClientSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    llm: LlmSettings = field(default_factory=lambda: LlmSettings())
    learning: LearningSettings = field(default_factory=lambda: LearningSettings())
    agent: AgentSettings = field(default_factory=AgentSettings)
    log_format: str = "json"
    log_level: str = "INFO"


# Where an OpenAI-compatible client goes when nothing names an endpoint (the openai SDK's own
# default), after ``llm.base_url`` / ``KE_LLM_BASE_URL`` and ``OPENAI_BASE_URL``.
DEFAULT_LLM_BASE_URL = "https://api.openai.com/v1"


def _price_in(prices: str, model: str, where: str) -> tuple[float, float] | None:
    """(input, output) USD per million tokens of ``model`` in a "m=in/out,m2=in" list."""
    for item in prices.split(","):
        name, _, pair = item.partition("=")
        if name.strip() == model and pair:
            inp, _, out = pair.partition("/")
            try:
                return float(inp), float(out or inp)
            except ValueError as exc:
                raise ConfigError(f"{where}: bad price {item!r}") from exc
    return None


def _names(csv: str) -> tuple[str, ...]:
    return tuple(m.strip() for m in csv.split(",") if m.strip())


@dataclass(frozen=True)
class LlmEndpoint:
    """One OpenAI-compatible endpoint of ``llm.endpoints``: its models are arms of the
    synthesizer's one bandit next to those of every other endpoint. Holds where its key is
    read, never the key."""

    name: str = ""  # in logs, records and arm names; default: endpoint-<n>
    base_url: str = ""
    models: str = ""  # comma-separated
    # Its key: the named variable (required to be set), else this Secret file, else the
    # shared sources (KERNELEVOLVE_LLM_API_KEY, llm.api_key_file, OPENAI_API_KEY).
    api_key_env: str = ""
    api_key_file: str = ""
    # Send no key at all, not even a shared one (a local vLLM / llama.cpp / Ollama server).
    keyless: bool = False
    # "model=in/out,..." USD per million tokens, as llm.prices (which still applies).
    prices: str = ""

    @property
    def model_list(self) -> tuple[str, ...]:
        return _names(self.models)


@dataclass(frozen=True)
class LlmArm:
    """One model of one endpoint: what the bandit chooses among."""

    arm: str  # the model name, or "model@endpoint" when two endpoints serve the same name
    endpoint: LlmEndpoint
    model: str  # as sent to the endpoint
    price_in: float = 0.0  # USD per million tokens
    price_out: float = 0.0


@dataclass(frozen=True)
class LlmSettings:
    """The LLM synthesizer (``synthesizer.kind`` ``llm`` or ``offline+llm``): OpenAI-compatible
    endpoints. Env ``KE_LLM_<FIELD>``, YAML section ``llm:``.

    One endpoint is ``base_url`` + ``models`` (``--llm-base-url``, ``--model``); several are
    ``endpoints`` (YAML list, ``KE_LLM_ENDPOINTS`` as YAML text, or repeated
    ``--llm-base-url`` flags), not both. The base URL of the single endpoint: the flag, else
    this setting, else ``OPENAI_BASE_URL`` (folded in by ``load_settings``), else
    ``DEFAULT_LLM_BASE_URL``."""

    base_url: str = ""
    # Comma-separated model names; several are chosen among per request by a bandit.
    models: str = ""
    # Where the key is read (``ke_synthesizer.llm.keys``; the key itself is never part of
    # Settings, so never logged or stored), first found wins: the variable named here
    # (``--api-key-env``; it must then be set), KERNELEVOLVE_LLM_API_KEY, the file
    # ``api_key_file`` (a mounted Kubernetes Secret), OPENAI_API_KEY; none: no key is sent.
    api_key_env: str = ""
    api_key_file: str = ""
    # Several endpoints, their models all arms of one bandit (see LlmEndpoint).
    endpoints: tuple[LlmEndpoint, ...] = ()
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 4096
    request_timeout_s: float = 120.0
    # Requests in flight to the endpoints at once, per synthesizer process.
    concurrency: int = 4
    # Retries of one request on 429 / 5xx / timeout, with exponential backoff from backoff_s.
    max_retries: int = 3
    backoff_s: float = 1.0
    stream: bool = False
    # Token budget of the prompt's evidence (counted with the offline estimator).
    prompt_tokens: int = 6000
    # Session budgets: spent tokens (prompt + completion) or USD; 0 = unlimited. When spent
    # the synthesizer offers nothing more and the session ends with its best verified kernel.
    session_token_budget: int = 0
    session_usd_budget: float = 0.0
    # Prices, "model=in/out,model2=in/out" in USD per million tokens (for the USD budget and
    # the bandit's gain per USD); a model without a price costs 0. An endpoint's own
    # ``prices`` come first; here a model may also be named by its arm ("model@endpoint").
    prices: str = ""
    # "offline": when the endpoint is down or refuses the key, propose with the offline
    # compiler instead (recorded in the candidate's genome); "" = the session fails.
    fallback: str = ""
    # With several endpoints: how long the models of one that stayed down or refused us are
    # left out while the others answer (seconds); with one, its error ends the session.
    endpoint_rest_s: float = 300.0
    # Repair attempts on a compile_error / runtime_error / incorrect LLM candidate.
    repair_attempts: int = 2
    # Bandit seed (Thompson sampling), for reproducible model choices.
    seed: int = 0

    @property
    def model_list(self) -> tuple[str, ...]:
        """The bandit's arms (model names; "model@endpoint" where a name repeats)."""
        return tuple(a.arm for a in self.arms())

    def price_of(self, model: str) -> tuple[float, float]:
        """(input, output) USD per million tokens of an arm or a model name."""
        for arm in self.arms():
            if model in (arm.arm, arm.model):
                return arm.price_in, arm.price_out
        return _price_in(self.prices, model, "llm.prices") or (0.0, 0.0)

    def endpoint_list(self) -> tuple[LlmEndpoint, ...]:
        """The configured endpoints, each with a name and a base URL."""
        if self.endpoints:
            if self.base_url or self.models:
                raise ConfigError("set llm.base_url/llm.models (one endpoint) or llm.endpoints (several), not both")
            named = []
            for i, ep in enumerate(self.endpoints, 1):
                name = ep.name or f"endpoint-{i}"
                if not ep.base_url:
                    raise ConfigError(f"llm.endpoints: endpoint {name} has no base_url")
                if ep.keyless and (ep.api_key_env or ep.api_key_file):
                    raise ConfigError(f"llm.endpoints: endpoint {name} is keyless but names a key source")
                named.append(replace(ep, name=name))
            if len({ep.name for ep in named}) != len(named):
                raise ConfigError("llm.endpoints: endpoint names must differ")
            return tuple(named)
        return (LlmEndpoint(name="default", base_url=self.base_url or DEFAULT_LLM_BASE_URL, models=self.models,
                            api_key_env=self.api_key_env),)

    def arms(self) -> tuple[LlmArm, ...]:
        """Every model of every endpoint, priced: the arms of the synthesizer's bandit."""
        pairs = [(ep, m) for ep in self.endpoint_list() for m in ep.model_list]
        seen: dict[str, int] = {}
        for _, m in pairs:
            seen[m] = seen.get(m, 0) + 1
        out = []
        for ep, m in pairs:
            arm = m if seen[m] == 1 else f"{m}@{ep.name}"
            price = (_price_in(ep.prices, m, f"llm.endpoints[{ep.name}].prices")
                     or _price_in(self.prices, arm, "llm.prices") or _price_in(self.prices, m, "llm.prices")
                     or (0.0, 0.0))
            out.append(LlmArm(arm, ep, m, *price))
        if len({a.arm for a in out}) != len(out):
            raise ConfigError("llm: a model is named twice on one endpoint")
        return tuple(out)


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _expand(value: Any, env: Mapping[str, str]) -> Any:
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name = m.group(1)
            if name not in env:
                raise ConfigError(f"config references ${{{name}}} but {name} is not set")
            return env[name]

        return _VAR.sub(sub, value)
    if isinstance(value, dict):
        return {k: _expand(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v, env) for v in value]
    return value


def _coerce(name: str, typ: Any, raw: Any) -> Any:
    args = [a for a in get_args(typ) if a is not type(None)]
    if get_origin(typ) is tuple and args and dataclasses.is_dataclass(args[0]):
        return _coerce_sections(name, args[0], raw)
    if get_origin(typ) in (Union, UnionType) and len(args) == 1:  # ``X | None``
        if raw is None or (isinstance(raw, str) and raw.strip().lower() in ("", "none", "null")):
            return None
        typ = args[0]
    try:
        if typ is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off", ""):
                return False
            raise ValueError(raw)
        if typ is int:
            return int(raw)
        if typ is float:
            return float(raw)
        return str(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config value {name}={raw!r} is not a valid {typ.__name__}") from exc


def _coerce_sections(name: str, item: Any, raw: Any) -> tuple[Any, ...]:
    """A list of sections (``llm.endpoints``): a YAML list of mappings, or the same list as
    YAML text from an environment variable (``KE_LLM_ENDPOINTS='[{base_url: ...}]'``)."""
    if isinstance(raw, str):
        try:
            raw = yaml.safe_load(raw) if raw.strip() else []
        except yaml.YAMLError as exc:
            raise ConfigError(f"config value {name} is not valid YAML: {exc}") from exc
    if not isinstance(raw, list | tuple) or not all(isinstance(v, Mapping) for v in raw):
        raise ConfigError(f"config value {name} must be a list of mappings")
    return tuple(_apply(item(), v, f"{name}[{i}].") for i, v in enumerate(raw))


def _apply(obj: Any, values: Mapping[str, Any], where: str) -> Any:
    hints = get_type_hints(type(obj))
    known = {f.name for f in fields(obj)}
    changes: dict[str, Any] = {}
    for key, raw in values.items():
        if key not in known:
            raise ConfigError(f"unknown config key {where}{key}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(raw, Mapping):
                raise ConfigError(f"config section {where}{key} must be a mapping")
            changes[key] = _apply(current, raw, f"{where}{key}.")
        else:
            changes[key] = _coerce(f"{where}{key}", hints[key], raw)
    return replace(obj, **changes)


def _env_values(section: Any, prefix: str, env: Mapping[str, str]) -> dict[str, Any]:
    """Values of ``section`` found in ``env``: field ``f`` is ``<prefix>_F``, a nested
    section ``s`` contributes its own fields under ``<prefix>_S``."""
    values: dict[str, Any] = {}
    for f in fields(section):
        var = f"{prefix}_{f.name}".upper()
        current = getattr(section, f.name)
        if dataclasses.is_dataclass(current):
            nested = _env_values(current, var, env)
            if nested:
                values[f.name] = nested
        elif var in env:
            values[f.name] = env[var]
    return values


def _from_env(base: Settings, env: Mapping[str, str]) -> Settings:
    return _apply(base, _env_values(base, "KE", env), "")


def load_settings(
    path: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Build Settings from defaults, an optional YAML file, the environment, then overrides."""
    env = dict(os.environ if env is None else env)
    settings = Settings()
    path = path or env.get("KE_CONFIG") or None
    if path:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            data = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {p} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"config file {p} must hold a mapping at top level")
        settings = _apply(settings, _expand(data, env), "")
    settings = _from_env(settings, env)
    llm = settings.llm
    if not llm.base_url and not llm.endpoints and env.get("OPENAI_BASE_URL"):
        # What every openai-SDK user already sets; below the product's own settings.
        settings = replace(settings, llm=replace(llm, base_url=env["OPENAI_BASE_URL"]))
    if overrides:
        settings = _apply(settings, overrides, "")
    return settings


@dataclass(frozen=True)
class LearningSettings:
    """What outlives a run: the shared knowledge folder and how skills steer a search."""

    # Open the local knowledge folder (knowledge.path) for each operation and close it
    # right after, so that concurrent sessions share it; false holds it open (one process).
    shared_folder: bool = True
    # How long an operation waits for a folder another process holds open before failing.
    lock_timeout_s: float = 30.0
    # Where the gateway and the search service reach the knowledge service ("host:port");
    # empty = 127.0.0.1:grpc.knowledge_port.
    knowledge_target: str = ""
    # Smallest gain (child time vs parent time, CI-separated) worth a skill: 0.05 = 5 %.
    min_gain: float = 0.05
    # Skills read at a session's start to bias parent selection and island seeding; 0 = none.
    prior_skills: int = 20


def default_knowledge_dir(env: Mapping[str, str]) -> Path:
    """The user-level knowledge folder every embedded session shares when knowledge.path is
    empty: $XDG_DATA_HOME/kernelevolve/knowledge (~/.local/share/... without it)."""
    base = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else Path.home() / ".local" / "share"
    return base / "kernelevolve" / "knowledge"


@dataclass(frozen=True)
class SearchSessionDefaults:
    """Defaults of a session's search options (``search.session.*``, ``KE_SEARCH_SESSION_*``);
    a request's non-zero value wins. See README, "Search engine"."""

    # Draft phase: this many independent samples from the reference before expansion
    # (0 = the strategy's own: beam its width, islands one seed per island, else 1).
    seeds: int = 0
    time_limit_s: float = 0.0  # 0 = no wall-clock budget
    plateau: int = 0  # end after N evaluations without a CI-separated improvement; 0 = never
    target_roofline: float = 0.0  # end when a candidate reaches this roofline fraction; 0 = never
    baseline: str = "eager"  # "eager" or "compile" (torch.compile, timed by the evaluator)
    # The precision contract (kernelevolve.precision): "default" (PyTorch's defaults plus
    # what the spec sets at import), "strict" (IEEE float32 everywhere) or "tf32".
    precision: str = "default"
    # Tuning stage (ke_search.tune): the last floor(budget * tune_share) evaluations sweep the
    # launch configurations (tiles, warps, stages) of the tune_elite fittest correct
    # candidates; 0 = no stage. A request sets either explicitly, 0 included.
    tune_share: float = 0.25
    tune_elite: int = 2
