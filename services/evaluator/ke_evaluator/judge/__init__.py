"""The parent side of the evaluator: what runs in the process that asks for verdicts.

``Judge`` (``judge.py``) checks a candidate against the static policy
(``static_policy.py``), derives its seed and sends it to a sandboxed worker of its pool
(``worker_pool.py``: processes, phase clocks, spares; ``worker_environment.py``: the
scrubbed environment they start with), over the wire protocol (``ke_evaluator.wire``).
``options.py`` holds ``EvalOptions`` and ``options_from_settings``, the one translation
from the typed settings. Nothing here imports torch at module level.
"""

from ke_evaluator.judge.judge import EvalJob, Judge
from ke_evaluator.judge.options import (
    EvalOptions,
    ReferenceCacheOptions,
    SandboxOptions,
    TimingOptions,
    WorkerPoolOptions,
    options_from_settings,
    resolve_device,
    resolve_hardware_kind,
)

__all__ = ["EvalJob", "EvalOptions", "Judge", "ReferenceCacheOptions", "SandboxOptions", "TimingOptions",
           "WorkerPoolOptions", "options_from_settings", "resolve_device", "resolve_hardware_kind"]
