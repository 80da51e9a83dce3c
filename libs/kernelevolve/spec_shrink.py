"""Specs at real sizes on the CPU interpreter: judge them at shrunk shapes.

A spec written for a GPU (``batch_size = 65536``, ``dim = 16384``: 4 GiB of input) cannot be
judged by Triton's CPU interpreter: a 67 M-element layer norm timed out after 120 s per
candidate with 7 GB resident. Before a CPU session starts, ``fit_for_interpreter`` measures
the spec without allocating anything (``torch.device("meta")``: inputs, parameters, and the
forward's FLOPs from ``FlopCounterMode``) and, when it is over ``ShrinkBudget``, returns a
variant that is not:

1. the spec's own ``get_cpu_inputs()`` / ``get_cpu_init_inputs()`` when it declares them;
2. else its module-level integer constants (``batch_size = 4096``; sizes derived from them,
   ``hidden = 4 * dim``, follow) halved one at a time, each step the one that lowers the cost
   most and keeps the reference running on meta tensors, until the spec fits;
3. else ``SpecShrinkError``: nothing to shrink, said up front instead of two timeouts.

The shrunk spec's reference is then run once for real on the CPU. All of it happens in a
child interpreter (``python -m kernelevolve.spec_probe``): the spec's code never runs in
the process that asks (the rule of ``kernelevolve.spec``). The pure parts (finding the
constants, rewriting them) need no torch.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kernelevolve import pyast
from kernelevolve.errors import InvalidSpecError, ResourceLimitError


class SpecShrinkError(ResourceLimitError):
    """The spec is too large for the CPU interpreter and cannot be shrunk to fit: a limit of
    ours (exit 3), not a fault of the spec; the message names the limit and its settings."""


# The settings that raise the interpreter's budget (ShrinkBudget), named in refusals.
BUDGET_SETTINGS = "evaluator.interpreter_max_flops, evaluator.interpreter_max_input_bytes"


@dataclass(frozen=True)
class ShrinkBudget:
    """What the interpreter judges in reasonable time. The CPU examples (examples/ops) stay
    under these: their largest input is 2**17 - 2**18 elements and a whole-model example's
    forward well under a GFLOP. Parameters only cost memory (their use is counted in
    FLOPs): a 50-layer residual net's 98 MiB are fine."""

    input_bytes: int = 4 * 2**20
    param_bytes: int = 512 * 2**20
    flops: float = 2.5e8


@dataclass(frozen=True)
class SizeConstant:
    """A module-level ``NAME = <int>`` (or ``NAME: int = <int>``) the shrinker may halve."""

    name: str
    value: int
    line: int  # 1-based
    col: int
    end_col: int


# Integers that are structure, not size: halving a kernel size, stride or head count
# changes what the operator computes, not how big it is. Values under 4 (dims, flags) are
# left alone too.
_STRUCTURAL = re.compile(r"(kernel|ksize|stride|pad|dilation|group|head|seed|expan|ratio|factor|axis|^k$|^p$)",
                         re.IGNORECASE)
MIN_VALUE = 4


def size_constants(source: str) -> list[SizeConstant]:
    """The module-level integer constants of ``source`` that look like sizes, in order."""
    try:
        tree = pyast.parse(source)
    except SyntaxError as exc:
        raise InvalidSpecError(f"spec does not parse: {exc.msg} (line {exc.lineno})") from exc
    found: list[SizeConstant] = []

    def add(target: ast.expr, value: ast.expr) -> None:
        if (isinstance(target, ast.Name) and isinstance(value, ast.Constant) and type(value.value) is int
                and value.value >= MIN_VALUE and not _STRUCTURAL.search(target.id)
                and value.end_col_offset is not None and value.lineno == value.end_lineno):
            found.append(SizeConstant(target.id, value.value, value.lineno, value.col_offset, value.end_col_offset))

    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(target.elts) == len(node.value.elts):
                for t, v in zip(target.elts, node.value.elts, strict=True):
                    add(t, v)
            else:
                add(target, node.value)
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            add(node.target, node.value)
    # A name assigned twice is not one constant: leave it alone.
    names = [c.name for c in found]
    return [c for c in found if names.count(c.name) == 1]


def rewrite(source: str, constants: list[SizeConstant], values: dict[str, int]) -> str:
    """``source`` with each constant's literal replaced by ``values[name]`` (others kept)."""
    lines = source.splitlines(keepends=True)
    # Right to left within a line, so earlier columns stay valid.
    for c in sorted(constants, key=lambda c: (c.line, c.col), reverse=True):
        if c.name in values and values[c.name] != c.value:
            text = lines[c.line - 1]
            lines[c.line - 1] = text[:c.col] + str(values[c.name]) + text[c.end_col:]
    return "".join(lines)


# The spec's inputs made at shrunk batch / spatial / sequence sizes: every size argument of
# a tensor factory (torch.randn(32, 3, 160, 160), torch.randint(0, 10, (32,)), ...) called by
# get_inputs() has its dimensions mapped through ``sizes`` (original -> shrunk), so values
# are drawn as the spec draws them, at the smaller shapes, and nothing is made at full size.
INPUTS_SUFFIX = """

# --- judged on the CPU interpreter at shrunk input sizes (same ops, same parameters) ---
def _ke_shrunk_inputs(_make=get_inputs, _sizes={sizes!r}):
    import torch
    from torch.overrides import TorchFunctionMode

    varargs = {{torch.randn, torch.rand, torch.zeros, torch.ones, torch.empty}}
    factories = varargs | {{torch.randint, torch.full, torch.normal, torch.randperm, torch.empty_strided}}

    def size(v):
        if isinstance(v, (tuple, list, torch.Size)) and v and all(type(d) is int for d in v):
            return type(v)(_sizes.get(d, d) for d in v) if not isinstance(v, torch.Size) else torch.Size(
                _sizes.get(d, d) for d in v)
        return v

    class Shrink(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {{}})
            if func in factories:
                if func in varargs and args and all(type(a) is int for a in args):
                    args = tuple(_sizes.get(a, a) for a in args)
                else:
                    args = tuple(size(a) for a in args)
                if "size" in kwargs:
                    kwargs["size"] = size(kwargs["size"])
            return func(*args, **kwargs)

    with Shrink():
        return _make()


get_inputs = _ke_shrunk_inputs  # noqa: F811
"""

CPU_SUFFIX = """

# --- judged on the CPU interpreter: the spec's own CPU-sized inputs ---
get_inputs = get_cpu_inputs  # noqa: F811
if "get_cpu_init_inputs" in globals():
    get_init_inputs = get_cpu_init_inputs  # noqa: F811
"""


def declares_cpu_inputs(source: str) -> bool:
    return bool(re.search(r"^def get_cpu_inputs\b", source, re.MULTILINE))


@dataclass
class InputShape:
    name: str
    shape: list[int] | None  # None: not a tensor
    dtype: str


@dataclass
class FitResult:
    """What the interpreter will judge: ``method`` is ``"as_is"`` (the spec fits),
    ``"get_cpu_inputs"``, ``"constants"`` (``changed``: name -> [before, after]) or
    ``"inputs"`` (the inputs' batch / spatial / sequence sizes, ``changed``: "size N" ->
    [N, smaller], re-traced on meta tensors: the same ops and parameter shapes)."""

    method: str
    source: str
    inputs: list[InputShape]
    original_inputs: list[InputShape]
    changed: dict[str, list[int]] = field(default_factory=dict)
    input_bytes: int = 0
    original_input_bytes: int = 0

    @property
    def shrunk(self) -> bool:
        return self.method != "as_is"

    def describe(self) -> str:
        """One line: ``judged at shrunk shapes: x [64, 4096] instead of [65536, 16384]``."""
        if not self.shrunk:
            return "judged at the spec's own shapes"
        parts = []
        for now, was in zip(self.inputs, self.original_inputs, strict=False):
            if now.shape is not None and now.shape != was.shape:
                parts.append(f"{now.name} {now.shape} instead of {was.shape}")
        how = "the spec's get_cpu_inputs()" if self.method == "get_cpu_inputs" else \
            ", ".join(f"{k} {a} -> {b}" for k, (a, b) in self.changed.items())
        if self.method == "inputs":
            how = ("input sizes " + ", ".join(f"{a} -> {b}" for a, b in self.changed.values())
                   + ", re-traced: same ops, same parameter shapes")
        return f"judged at shrunk shapes: {'; '.join(parts) or 'inputs unchanged'} (by {how})"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        d["shrunk"] = self.shrunk
        d["description"] = self.describe()
        return d


class FitProbe:
    """``fit_for_interpreter`` started now and collected later: the child sizes the spec
    (a few seconds, most of it importing torch) while the caller starts its services."""

    def __init__(self, source: str, budget: ShrinkBudget | None = None, import_timeout_s: float = 60.0) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="ke-fit-")
        request = Path(self._folder.name) / "request.json"
        # import_timeout_s: the spec's first import in the child (evaluator.spec_import_timeout_s);
        # a hanging one is answered as a spec error then, not after ``result``'s timeout.
        request.write_text(json.dumps({"source": source, "budget": asdict(budget or ShrinkBudget()),
                                       "import_timeout_s": import_timeout_s}))
        self._proc = subprocess.Popen([sys.executable, "-m", "kernelevolve.spec_probe", str(request)],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def close(self) -> None:
        """Stop the child if it still runs (the caller gave up before asking)."""
        if self._proc.poll() is None:
            self._proc.kill()
            self._proc.communicate()
        self._folder.cleanup()

    def result(self, timeout_s: float = 300.0) -> FitResult:
        """The answer (see ``fit_for_interpreter``); the child is killed past ``timeout_s``."""
        try:
            out, err = self._proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired as exc:
            self._proc.kill()
            self._proc.communicate()
            raise InvalidSpecError(f"sizing the spec for the CPU interpreter took over {timeout_s:.0f}s") from exc
        finally:
            self._folder.cleanup()
        try:
            answer = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError) as exc:
            raise InvalidSpecError(f"sizing the spec for the CPU interpreter failed: {err[-600:]}") from exc
        if "error" in answer:
            cls = SpecShrinkError if answer.get("kind") == "shrink" else InvalidSpecError
            raise cls(answer["error"])
        return FitResult(method=answer["method"], source=answer["source"],
                         inputs=[InputShape(**i) for i in answer["inputs"]],
                         original_inputs=[InputShape(**i) for i in answer["original_inputs"]],
                         changed={k: list(v) for k, v in answer["changed"].items()},
                         input_bytes=answer["input_bytes"], original_input_bytes=answer["original_input_bytes"])


def fit_for_interpreter(source: str, budget: ShrinkBudget | None = None, timeout_s: float = 300.0) -> FitResult:
    """The spec as the CPU interpreter should judge it (see the module docstring), measured
    and checked in a child interpreter. SpecShrinkError when it is too large and cannot be
    shrunk; InvalidSpecError when it cannot be measured at all."""
    return FitProbe(source, budget).result(timeout_s)
