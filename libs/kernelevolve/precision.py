"""The precision contract: the float32 numerics the reference, the baselines and the
candidate are judged under. Named on every verdict, in the summary and the report, in the
cache keys and in every skill learned from a verdict.

Three contracts (``--precision``):

- ``default``: PyTorch's numerics as a user's process has them: torch's defaults as a fresh
  process sets them, then whatever the spec module itself sets at import. PyTorch keeps
  ``torch.backends.cudnn.allow_tf32 = True`` by default, so eager convolutions (and
  recurrent layers) run TF32 on GPUs that have it; matmuls stay IEEE. Measured on an H200:
  a transposed 2-D convolution took 5.37 ms eager with these defaults and 29.5 ms with
  TF32 off, so a speedup measured against strict eager misstates what a user gains by 5x.
- ``strict``: IEEE float32 everywhere (TF32 off for cuBLAS and cuDNN, matmul precision
  "highest"): what every verdict used before contracts existed; for users who need it.
- ``tf32``: TF32 for matmuls too (cuBLAS and cuDNN, matmul precision "high").

The float64 error budget is computed from the reference run under the contract, so a
candidate may use TF32 exactly where eager does. The evaluator's worker resolves a name into
concrete flags (``ke_evaluator.worker.precision``); this module holds the names and the
record that travels, with no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from kernelevolve.errors import InvalidArgumentError

ContractName = Literal["default", "strict", "tf32"]
CONTRACTS: tuple[ContractName, ...] = ("default", "strict", "tf32")
DEFAULT: ContractName = "default"

_SUMMARY = {
    "default": "PyTorch's defaults and the spec's own settings",
    "strict": "IEEE float32 everywhere (TF32 off)",
    "tf32": "TF32 for matmuls and cuDNN",
}

# The flags a contract names, as the worker reads them (``worker.precision.read_flags``);
# the raw fp32_precision slots of torch >= 2.9 come beside them when torch has them.
MATMUL_TF32 = "cuda.matmul.allow_tf32"
CUDNN_TF32 = "cudnn.allow_tf32"
MATMUL_PRECISION = "float32_matmul_precision"
CUDNN_BENCHMARK = "cudnn.benchmark"
CUDNN_DETERMINISTIC = "cudnn.deterministic"


def check_name(name: str | None) -> ContractName:
    """The contract a user asked for ("" and None: ``default``); raises
    ``InvalidArgumentError`` for any other name."""
    value = (name or DEFAULT).strip().lower()
    if value not in CONTRACTS:
        raise InvalidArgumentError(f"precision must be one of {', '.join(CONTRACTS)}, got {name!r}")
    return value  # type: ignore[return-value]


def cache_tag(name: str | None) -> str:
    """The contract's part of a cache key: verdicts, references and skills of one contract
    are never reused under another."""
    return f"precision={check_name(name)}"


@dataclass
class Precision:
    """One job's resolved contract: its name, the flags it ran under and, for ``default``,
    what the spec set at import beyond torch's defaults (``spec_flags``)."""

    name: str = DEFAULT
    flags: dict[str, str] = field(default_factory=dict)
    spec_flags: dict[str, str] = field(default_factory=dict)

    @property
    def tf32_matmul(self) -> bool | None:
        return _bool(self.flags.get(MATMUL_TF32))

    @property
    def tf32_cudnn(self) -> bool | None:
        return _bool(self.flags.get(CUDNN_TF32))

    def describe(self) -> str:
        """One line for a summary or a report: the name and what it means concretely."""
        return describe(self.name, self.flags, self.spec_flags)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "flags": dict(self.flags), "spec_flags": dict(self.spec_flags),
                "description": self.describe()}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Precision:
        d = data or {}
        return cls(name=str(d.get("name") or DEFAULT), flags={k: str(v) for k, v in (d.get("flags") or {}).items()},
                   spec_flags={k: str(v) for k, v in (d.get("spec_flags") or {}).items()})


def _bool(value: str | None) -> bool | None:
    return None if value in (None, "", "mixed") else value == "True"


def describe(name: str, flags: dict[str, str] | None = None, spec_flags: dict[str, str] | None = None) -> str:
    """``default (PyTorch's defaults and the spec's own settings: matmul TF32 off, cuDNN TF32
    on, float32_matmul_precision=highest; the spec set cudnn.allow_tf32=False)``."""
    head = f"{name} ({_SUMMARY.get(name, name)}"
    flags = flags or {}
    parts = []
    for key, label in ((MATMUL_TF32, "matmul TF32"), (CUDNN_TF32, "cuDNN TF32")):
        val = flags.get(key)
        if val:
            parts.append(f"{label} {'on' if val == 'True' else 'off' if val == 'False' else val}")
    if flags.get(MATMUL_PRECISION):
        parts.append(f"{MATMUL_PRECISION}={flags[MATMUL_PRECISION]}")
    if flags.get(CUDNN_BENCHMARK) == "True":
        parts.append("cudnn.benchmark on")
    text = head + (": " + ", ".join(parts) if parts else "")
    if spec_flags:
        # torch >= 2.9 moves its per-op fp32_precision slots with every legacy flag: name
        # them only when the spec set nothing else.
        named = {k: v for k, v in spec_flags.items() if not k.startswith("fp32_precision.")} or spec_flags
        text += "; the spec set " + ", ".join(f"{k}={v}" for k, v in sorted(named.items()))
    return text + ")"
