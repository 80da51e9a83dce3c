"""The one error hierarchy of KernelEvolve.

Adapters map third-party errors into these (``raise StoreUnavailable(...) from exc``);
one gRPC interceptor maps them to status codes (``kernelevolve.grpc_util``).

    KernelEvolveError
    ├── PermanentError                 retrying the same call cannot help
    │   ├── InvalidSpecError           spec does not parse / lacks Model, get_inputs,
    │   │                              get_init_inputs / reference raises   → INVALID_ARGUMENT
    │   ├── InvalidArgumentError       any other bad input                  → INVALID_ARGUMENT
    │   ├── NotFoundError              unknown session / candidate / key    → NOT_FOUND
    │   ├── ConflictError              e.g. session id already used         → ALREADY_EXISTS
    │   ├── ConfigError                bad or missing configuration         → FAILED_PRECONDITION
    │   ├── ResourceLimitError         the input is valid but needs more memory than this
    │   │                              installation's limits allow (the reference ran out
    │   │                              of memory inside the evaluator's own limits)
    │   │                                                                   → RESOURCE_EXHAUSTED
    │   ├── NothingToComputeError      the spec's reference only views its inputs (reshape,
    │   │                              permute, split): no kernel to write; neither the
    │   │                              user's error nor ours (the CLI exits 1) → FAILED_PRECONDITION
    │   └── SynthesisError             the synthesizer could not produce code → INTERNAL
    │       ├── LoweringError          one part of a graph has no lowering (caught inside the
    │       │                          offline synthesizer: that part becomes a library call)
    │       ├── LlmAuthError           the LLM endpoint refused the API key (401/403)
    │       └── LlmUnavailable         the LLM endpoint stayed down / overloaded after retries
    └── RetryableError                 may succeed later                    → UNAVAILABLE
        ├── BusUnavailable             NATS unreachable / timed out
        ├── StoreUnavailable           object store unreachable
        ├── IndexUnavailable           vector index unreachable
        ├── DependencyTimeout          a downstream call timed out          → DEADLINE_EXCEEDED
        └── DeviceUnavailable          the evaluation device cannot start a worker (no memory)

A candidate that fails to compile, crashes, hangs or is wrong is *not* an error: it
is a verdict (``EvaluationStatus``) returned as data.
"""

from __future__ import annotations


class KernelEvolveError(Exception):
    """Base of every error KernelEvolve raises on purpose."""

    retryable: bool = False


class PermanentError(KernelEvolveError):
    """Retrying the same call with the same input cannot succeed."""


class InvalidSpecError(PermanentError):
    """The operator spec is unusable; the message names the problem."""


class InvalidArgumentError(PermanentError):
    """A request argument is malformed or out of range."""


class NotFoundError(PermanentError):
    """The named session, candidate or object does not exist."""


class ConflictError(PermanentError):
    """The request conflicts with existing state."""


class ConfigError(PermanentError):
    """Configuration is missing or malformed (e.g. an unset ${VAR})."""


class ResourceLimitError(PermanentError):
    """A valid input needs more than this installation allows (memory, above all): not the
    user's fault, so never reported as a bad spec; the message says what was needed, what
    the limit is and which setting raises it. The CLI exits 3 for it."""


class NothingToComputeError(PermanentError):
    """The operator spec is valid but its reference only views its inputs (every output a
    reshape, permute, split or slice of an input): there is nothing for a kernel to compute,
    so no candidate is judged. The message starts "nothing to compute:"; the CLI exits 1."""


class SynthesisError(PermanentError):
    """The synthesizer failed to produce a candidate for a request."""


class RetryableError(KernelEvolveError):
    """A dependency is unavailable; the same call may succeed later."""

    retryable = True


class BusUnavailable(RetryableError):
    """The message bus could not be reached or did not answer in time."""


class StoreUnavailable(RetryableError):
    """The object store could not be reached."""


class IndexUnavailable(RetryableError):
    """The vector index could not be reached."""


class DependencyTimeout(RetryableError):
    """A downstream call exceeded its deadline."""


class DeviceUnavailable(RetryableError):
    """The evaluation device could not start a worker (out of memory at CUDA start-up after
    retries): not a candidate's verdict; the job may succeed once memory frees up."""


class LoweringError(SynthesisError):
    """The offline synthesizer cannot lower one part of a graph (an operand, an op or a
    knob value it has no code for). Caught inside the synthesizer: the part becomes a
    library call; it reaches a caller only as the SynthesisError of a whole spec."""


class LlmAuthError(SynthesisError):
    """The LLM endpoint refused the API key: no retry can help; the session ends with this."""


class LlmUnavailable(SynthesisError):
    """The LLM endpoint was unreachable, timed out or kept answering 429/5xx after the
    configured retries (each already retried with backoff): the session ends with this."""
