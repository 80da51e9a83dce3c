"""KernelBench-style specs from PyTorch's operator database (the OpInfo entries of
``torch.testing._internal.common_methods_invocations.op_db``, the ones Inductor's own
opinfo tests sweep).

One spec per entry: a ``Model`` whose forward calls the operator on the entry's first
float32 CPU sample (the first whose tensors hold two elements or more). The sample's
tensors are the spec's inputs, written out value by value in ``get_inputs`` (the samples
are small, and their values respect the operator's domain: ``acos`` gets values in
[-1, 1], an index argument valid indices); every other argument is baked into the forward
as a Python literal.

Eligibility (the sweep's denominator): an entry *counts* when it supports float32 on the
CPU, its float32 sample runs, it is deterministic (two calls under different RNG
seeds agree, and it does not return uninitialised memory) and it returns a dense tensor
or a tuple / list of them (sparse inputs and results are storage formats, not a
kernel's). ``linalg.*`` and ``fft.*`` entries are counted apart.

Needs ``expecttest`` (imported by torch's testing internals).
"""

from __future__ import annotations

import ast
import inspect
import math
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

COUNTED = "counted"
LINALG_FFT = "linalg_fft"
INELIGIBLE = "ineligible"
# factories of uninitialised memory: two calls may agree by chance, their values mean nothing
UNINITIALISED = ("empty", "new_empty", "empty_like", "empty_strided", "empty_permuted", "new_empty_strided")
# namespaces an OpInfo name may live in, tried in order for a source expression of its op
NAMESPACES = ("torch.", "torch.Tensor.", "torch.nn.functional.", "torch.special.", "torch.linalg.", "torch.fft.")


class SpecError(Exception):
    """An entry's sample cannot be written as a spec (an argument with no literal)."""


@dataclass(frozen=True)
class OpSpec:
    """One OpInfo entry: its spec source (None when there is none) and where it counts."""

    entry: str  # "name" or "name.variant"
    opinfo_class: str  # UnaryUfuncInfo, BinaryUfuncInfo, ReductionOpInfo, OpInfo, ...
    group: str  # COUNTED, LINALG_FFT or INELIGIBLE
    reason: str  # why ineligible; "" when counted
    source: str | None
    outputs: int = 1  # tensors returned (several: a multi-output operator)


def entry_name(op: Any) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_db() -> list[Any]:
    import torch.backends

    allowed = torch.backends.flags_frozen()
    from torch.testing._internal.common_methods_invocations import op_db as db

    # importing torch's test suite freezes the global backend flags for the whole process
    # (torch.backends.disable_global_flags): a later caller setting cudnn.allow_tf32, as the
    # precision contract does, would raise "not allowed to set torch.backends.cudnn flags"
    if not allowed and torch.backends.flags_frozen():
        torch.backends.flags_frozen.__globals__["__allow_nonbracketed_mutation_flag"] = True
    return list(db)


def _resolve(op: Any) -> str | None:
    """A source expression that evaluates to the entry's callable, or None (a lambda or a
    helper of torch's test suite)."""
    names = [op.name, op.aten_name] if getattr(op, "aten_name", None) else [op.name]
    for name in names:
        for ns in NAMESPACES:
            for full in (ns + name, ns + name.split(".", 1)[-1]):
                try:
                    fn = eval(full, {"torch": torch})  # noqa: S307 - our own dotted names
                except Exception:  # noqa: BLE001 - a name absent from this namespace
                    continue
                if fn is op.op:
                    return full
    return None


def _lambda_source(fn: Any) -> str | None:
    """The text of a lambda defined inline in the database (``op=lambda x: x.T``), or
    None: the lambda in its source lines whose bytecode is the function's own."""
    code = getattr(fn, "__code__", None)
    if getattr(fn, "__name__", "") != "<lambda>" or code is None:
        return None
    try:
        text = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    start = text.find("lambda")
    while start >= 0:
        # a lambda of the database is a line or three; the statement around it can be long
        piece = text[start:start + 600]
        for end in range(len(piece), 0, -1):
            try:
                tree = ast.parse(piece[:end], mode="eval")
            except SyntaxError:
                continue
            if isinstance(tree.body, ast.Lambda):
                found = " ".join(piece[:end].split())
                compiled = compile(found, "<lambda>", "eval").co_consts
                if any(isinstance(c, types.CodeType) and c.co_code == code.co_code for c in compiled):
                    return found
                break
        start = text.find("lambda", start + 1)
    return None


def _names(code: types.CodeType) -> set[str]:
    """Global names a function's code (and the code nested in it) refers to."""
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _names(c)
    return names


def _float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)


def _scalar(v: Any) -> str:
    if isinstance(v, bool) or v is None or isinstance(v, (int, str)):
        return repr(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, complex):
        return f"complex({_float(v.real)}, {_float(v.imag)})"
    raise SpecError(f"no literal for {type(v).__name__}")


def _nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    return _scalar(values)


def tensor_literal(t: torch.Tensor) -> str:
    """Python source that rebuilds ``t``'s values, dtype and shape (contiguous, on the CPU)."""
    if t.layout != torch.strided:
        raise SpecError(f"a {t.layout} input")
    t = t.detach().cpu()
    dtype = str(t.dtype)
    if t.dim() == 0:
        return f"torch.tensor({_scalar(t.item())}, dtype={dtype})"
    flat = _nested(t.reshape(-1).tolist())
    return f"torch.tensor({flat}, dtype={dtype}).reshape({tuple(t.shape)!r})"


class _Writer:
    """Replaces the tensors of a sample's arguments with input names, other values with
    literals."""

    def __init__(self) -> None:
        self.tensors: list[torch.Tensor] = []

    def arg(self, v: Any) -> str:
        if isinstance(v, torch.Tensor):
            self.tensors.append(v)
            return f"x{len(self.tensors) - 1}"
        if isinstance(v, torch.Size):
            return f"torch.Size({list(v)!r})"
        if isinstance(v, tuple):
            inner = ", ".join(self.arg(x) for x in v)
            return f"({inner},)" if len(v) == 1 else f"({inner})"
        if isinstance(v, list):
            return "[" + ", ".join(self.arg(x) for x in v) + "]"
        if isinstance(v, (torch.dtype, torch.layout, torch.memory_format)):
            return str(v)
        if isinstance(v, torch.device):
            return "x0.device"  # the device the inputs are on, never a fixed one
        if isinstance(v, slice):
            return f"slice({self.arg(v.start)}, {self.arg(v.stop)}, {self.arg(v.step)})"
        if v is Ellipsis:
            return "..."
        return _scalar(v)


HEADER = '''"""OpInfo entry {entry}: the operator on its first float32 sample."""
import torch
import torch.nn as nn

nan = float("nan")
inf = float("inf")
{helper}

class Model(nn.Module):
    def forward(self{params}):
        return {call}


def get_inputs():
    return [
{inputs}
    ]


def get_init_inputs():
    return []
'''


def spec_source(op: Any, sample: Any) -> str:
    """The spec calling ``op`` on ``sample`` (a torch ``SampleInput``)."""
    expr, helper = _resolve(op), ""
    if expr is None and isinstance(op.op, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        expr = f"torch.ops.{op.op}"  # aten.slice.Tensor
    lam = _lambda_source(op.op) if expr is None else None
    if lam is not None:
        # the database's own wrapper of the operator (argument order, a clone before an
        # in-place call), written into the spec as it is
        expr, helper = "_op", f"\n_op = {lam}\n"
    w = _Writer()
    first = w.arg(sample.input)
    args = [w.arg(a) for a in sample.args]
    kwargs = [f"{k}={w.arg(v)}" for k, v in sample.kwargs.items()]
    if expr is not None:
        call = f"{expr}({', '.join([first, *args, *kwargs])})"
    elif isinstance(sample.input, torch.Tensor) and callable(getattr(op, "method_variant", None)):
        # the entry's function is a test-suite lambda; its method is the operator it tests
        call = f"{first}.{op.method_variant.__name__}({', '.join([*args, *kwargs])})"
    else:
        raise SpecError("no source expression for the entry's callable")
    if not w.tensors:
        raise SpecError("the sample has no tensor argument")
    params = "".join(f", x{i}" for i in range(len(w.tensors)))
    inputs = "\n".join(f"        {tensor_literal(t)}," for t in w.tensors)
    return HEADER.format(entry=entry_name(op), helper=helper, params=params, call=call, inputs=inputs)


def _tensors(out: Any) -> list[torch.Tensor] | None:
    """The tensors of an output that is a tensor or a (nested) tuple / list of them; None
    for anything else."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)) and out:
        parts = [_tensors(o) for o in out]
        if all(p is not None for p in parts):
            return [t for p in parts for t in p]  # type: ignore[union-attr]
    return None


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Equal shapes, dtypes and values, NaN equal to NaN."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        x, y = x.detach(), y.detach()
        if x.is_complex():
            x, y = torch.view_as_real(x.to(torch.complex128)), torch.view_as_real(y.to(torch.complex128))
        elif x.is_floating_point():
            x, y = x.double(), y.double()
        if not torch.equal(torch.isnan(x), torch.isnan(y)) if x.is_floating_point() else False:
            return False
        if x.is_floating_point():
            x, y = torch.nan_to_num(x, 0.0, 1.0, -1.0), torch.nan_to_num(y, 0.0, 1.0, -1.0)
        if not torch.equal(x, y):
            return False
    return True


def _call(op: Any, sample: Any, seed: int) -> Any:
    torch.manual_seed(seed)
    with torch.no_grad():
        return op(sample.input, *sample.args, **sample.kwargs)


def first_sample(op: Any) -> Any | None:
    """The entry's first float32 CPU sample whose tensors all hold two elements or more,
    else its first sample: on a one-element tensor every reduction is a copy, and the
    evaluator rightly credits no kernel for a copy."""
    first = None
    for sample in op.sample_inputs("cpu", torch.float32, requires_grad=False):
        first = sample if first is None else first
        tensors = [t for t in _leaves((sample.input, sample.args, sample.kwargs)) if isinstance(t, torch.Tensor)]
        if tensors and all(t.numel() >= 2 for t in tensors):
            return sample
    return first


def classify(op: Any) -> OpSpec:
    """The entry's spec and where it counts (see the module's docstring)."""
    entry, cls = entry_name(op), type(op).__name__
    group = LINALG_FFT if op.name.startswith(("linalg.", "fft.")) else COUNTED

    def out(reason: str) -> OpSpec:
        return OpSpec(entry, cls, INELIGIBLE if group == COUNTED else group, reason, None)

    if not op.supports_dtype(torch.float32, "cpu"):
        return out("no float32 on the CPU")
    if op.name in UNINITIALISED:
        return out("nondeterministic: uninitialised memory")
    if "wrapper_set_seed" in _names(getattr(op.op, "__code__", None) or (lambda: None).__code__):
        # the database seeds a random operator inside its own wrapper, so two calls agree
        return out("nondeterministic: a random operator")
    try:
        sample = first_sample(op)
    except Exception as exc:  # noqa: BLE001 - the database's own sample generator failed
        return out(f"no sample: {type(exc).__name__}: {exc}"[:200])
    if sample is None:
        return out("no float32 sample")
    try:
        first, second = _call(op, sample, 0), _call(op, sample, 1)
    except Exception as exc:  # noqa: BLE001 - the operator raised on its own sample
        return out(f"the sample raises: {type(exc).__name__}: {exc}"[:200])
    a, b = _tensors(first), _tensors(second)
    if a is None or b is None:
        return out(f"returns {type(first).__name__}, not tensors")
    if any(t.layout != torch.strided for t in a) or any(
            isinstance(t, torch.Tensor) and t.layout != torch.strided
            for t in (sample.input, *sample.args, *sample.kwargs.values())):
        return out("sparse input or output")
    if not _same(a, b):
        return out("nondeterministic: two seeds disagree")
    if not any(isinstance(t, torch.Tensor) for t in _leaves((sample.input, sample.args, sample.kwargs))):
        return out("a factory: the sample has no tensor argument")
    try:
        source = spec_source(op, sample)
        got = run_spec(source)
    except Exception as exc:  # noqa: BLE001 - a spec we could not write or run: a sweep failure
        return OpSpec(entry, cls, group, f"no spec: {type(exc).__name__}: {exc}"[:200], None, len(a))
    if got is None or not _same(got, a):
        return OpSpec(entry, cls, group, "no spec: the spec's output differs from the operator's", None, len(a))
    return OpSpec(entry, cls, group, "", source, len(a))


def _leaves(v: Any) -> Iterator[Any]:
    if isinstance(v, (tuple, list)):
        for x in v:
            yield from _leaves(x)
    elif isinstance(v, dict):
        for x in v.values():
            yield from _leaves(x)
    else:
        yield v


def run_spec(source: str) -> list[torch.Tensor] | None:
    """The tensors the spec's ``Model`` returns on its inputs (None: not tensors)."""
    mod = types.ModuleType("opinfo_spec")
    exec(compile(source, "<opinfo spec>", "exec"), mod.__dict__)  # noqa: S102 - a spec we wrote
    with torch.no_grad():
        return _tensors(mod.Model(*mod.get_init_inputs())(*mod.get_inputs()))


def classify_all(ops: list[Any] | None = None, where: Callable[[str], bool] | None = None) -> Iterator[OpSpec]:
    for op in ops if ops is not None else op_db():
        if where is None or where(entry_name(op)):
            yield classify(op)
