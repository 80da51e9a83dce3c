"""Integer elementwise ops with torch's exact integer semantics (feature hashing, bucket
arithmetic, id manipulation): add / sub / mul (wrapping), bitwise and / or / xor / not,
shifts, remainder and floor division (Python's signs), fmod and truncating division (C's),
neg, abs, maximum / minimum, on int8-int64 and uint8 tensors and integer scalars.

The pointwise family computes in fp32 registers, which rounds integers past 2**24, so it
leaves every op with an integer tensor operand alone; this family takes those. One lane per
output element; operands are read through the strides of their broadcast view (no copies).
Each result is computed in Triton's promoted type (an int32 tensor times a literal past
2**31 is an int64 product) and cast to the output dtype: the low bits of a wrapping add,
sub, mul, and, or, xor or left shift are the same at any width, and a right shift,
division or remainder of sign-extended values is exact, so this matches torch's wrapping
narrow arithmetic bit for bit. One kernel per op: integer consumers do not fuse.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.coords import unravel_lines
from ...emit.grid import program_id_lines, wide_offsets
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import kernel_name
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

INT_DTYPES = {torch.int64: "tl.int64", torch.int32: "tl.int32", torch.int16: "tl.int16", torch.int8: "tl.int8",
              torch.uint8: "tl.uint8"}
_BINARY: dict[Any, str] = {
    operator.add: "add", torch.add: "add", "add": "add", operator.sub: "sub", torch.sub: "sub", "sub": "sub",
    operator.mul: "mul", torch.mul: "mul", "mul": "mul",
    operator.and_: "and", torch.bitwise_and: "and", "bitwise_and": "and", "__and__": "and",
    operator.or_: "or", torch.bitwise_or: "or", "bitwise_or": "or", "__or__": "or",
    operator.xor: "xor", torch.bitwise_xor: "xor", "bitwise_xor": "xor", "__xor__": "xor",
    operator.lshift: "lshift", torch.bitwise_left_shift: "lshift", "bitwise_left_shift": "lshift",
    "__lshift__": "lshift",
    operator.rshift: "rshift", torch.bitwise_right_shift: "rshift", "bitwise_right_shift": "rshift",
    "__rshift__": "rshift",
    operator.mod: "remainder", torch.remainder: "remainder", "remainder": "remainder",
    torch.fmod: "fmod", "fmod": "fmod",
    operator.floordiv: "floor_divide", torch.floor_divide: "floor_divide", "floor_divide": "floor_divide",
    torch.maximum: "maximum", "maximum": "maximum", torch.minimum: "minimum", "minimum": "minimum",
}
_UNARY: dict[Any, str] = {operator.invert: "not", torch.bitwise_not: "not", "bitwise_not": "not",
                          operator.neg: "neg", torch.neg: "neg", "neg": "neg", torch.abs: "abs", "abs": "abs"}
# (a, b) -> expression; remainder and floor division fix C's truncation to Python's floor
_EXPR = {
    "add": "a + b", "sub": "a - b", "mul": "a * b", "and": "a & b", "or": "a | b", "xor": "a ^ b",
    "lshift": "a << b", "rshift": "a >> b", "fmod": "a % b", "maximum": "tl.maximum(a, b)",
    "minimum": "tl.minimum(a, b)",
    "remainder": "tl.where((a % b != 0) & ((a % b < 0) != (b < 0)), a % b + b, a % b)",
    "floor_divide": "tl.where((a % b != 0) & ((a < 0) != (b < 0)), a // b - 1, a // b)",
    "trunc_divide": "a // b",
    "not": "~a", "neg": "-a", "abs": "tl.where(a < 0, -a, a)",
}


def _is_tensor(v: Any) -> bool:
    return isinstance(v, torch.fx.Node) and shape_of(v) is not None


def _operand_ok(v: Any) -> bool:
    """An integer tensor, an int literal, or a graph scalar (``w.shape[0]``: with an integer
    result, a non-tensor operand is an integer)."""
    if _is_tensor(v):
        return dtype_of(v) in INT_DTYPES
    return isinstance(v, torch.fx.Node) or (isinstance(v, int) and not isinstance(v, bool))


def integer_op(node: torch.fx.Node) -> NormOp | None:
    """The integer elementwise op of ``node`` (every operand an integer tensor or scalar,
    the output an integer tensor), or None."""
    if dtype_of(node) not in INT_DTYPES or node.op not in ("call_function", "call_method"):
        return None
    key = node.target if node.op == "call_function" else str(node.target)
    args = list(node.args)
    kwargs = dict(node.kwargs)
    name = _BINARY.get(key) or _UNARY.get(key)  # type: ignore[call-overload]
    if key in (torch.div, "div") and kwargs.get("rounding_mode") in ("floor", "trunc"):
        name = "floor_divide" if kwargs.pop("rounding_mode") == "floor" else "trunc_divide"
    if name is None:
        return None
    if name in ("add", "sub") and kwargs.pop("alpha", 1) != 1:
        return None
    if kwargs:
        return None
    unary = name in ("not", "neg", "abs")
    if len(args) != (1 if unary else 2) or not all(_operand_ok(a) for a in args):
        return None
    if not any(_is_tensor(a) for a in args):
        return None
    return NormOp("integer", {"input": args[0], **({} if unary else {"other": args[1]})}, extra={"name": name})


def gen_integer(plan: Plan, group: Group, genome: dict[str, str]) -> Emitted:
    node = group.members[0]
    op = group.ops[node]
    out_dtype = dtype_of(node)
    shape = shape_of(node)
    if out_dtype not in INT_DTYPES or not shape:
        raise LoweringError("integer: an integer tensor output of rank 1 or more")
    r = len(shape)
    operands = [op.args["input"]] + ([op.args["other"]] if "other" in op.args else [])
    tensors = [v for v in operands if _is_tensor(v)]
    scalars = [v for v in operands if isinstance(v, torch.fx.Node) and not _is_tensor(v)]
    block = int(IntegerFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(IntegerFamily.value(genome, group, "num_warps"))
    name = kernel_name(group, f"int_{op.extra['name']}")
    sig = [f"x{i}_ptr" for i in range(len(tensors))] + ["out_ptr", "n"] + [f"S{d}" for d in range(r)]
    sig += [f"x{i}_s{d}" for i in range(len(tensors)) for d in range(r)] + [f"c{i}" for i in range(len(scalars))]
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", "    BLOCK_SIZE: tl.constexpr,", "):",
             f"    # {op.extra['name']} of integers: torch's exact integer semantics",
             *program_id_lines(["pid"], wide=wide_offsets(group)),
             "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
             "    mask = offs < n"]
    lines += unravel_lines(r)
    for var, v in zip("ab", operands, strict=False):
        if v in scalars:
            lines.append(f"    {var} = c{scalars.index(v)}")
        elif isinstance(v, torch.fx.Node):
            i = tensors.index(v)
            addr = " + ".join(f"o{d} * x{i}_s{d}" for d in range(r))
            lines.append(f"    {var} = tl.load(x{i}_ptr + {addr}, mask=mask, other=1)")
        else:
            lines.append(f"    {var} = {int(v)!r}")
    lines += [f"    val = ({_EXPR[op.extra['name']]}).to({INT_DTYPES[out_dtype]})",
              "    tl.store(out_ptr + offs, val, mask=mask)"]
    kernel = "\n".join(lines) + "\n"
    params = [f"x{i}" for i in range(len(tensors))] + [f"c{i}" for i in range(len(scalars))]
    ll = [f"def launch_{name}({', '.join(params)}):",
          f"    shape = _broadcast_shape({', '.join(f'x{i}.shape' for i in range(len(tensors)))}, ())",
          f"    if len(shape) != {r}:",
          f"        raise RuntimeError('{name}: an output of rank {r} expected')",
          "    out = torch.empty(shape, device=x0.device, dtype=" + str(out_dtype) + ")",
          "    n = out.numel()",
          "    if n == 0:", "        return out",
          f"    block = min({block}, _pow2(n))"]
    strides = [f"*_expanded_strides(shape, x{i}.shape, x{i}.stride())" for i in range(len(tensors))]
    call = params[:len(tensors)] + ["out", "n", "*shape"] + strides + params[len(tensors):]
    ll += [f"    {name}[((n + block - 1) // block,)]({', '.join(call)}, BLOCK_SIZE=block, num_warps={warps})",
           "    return out"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


class IntegerFamily(KernelFamily):
    """Integer elementwise ops the fp32 pointwise family leaves to the library."""

    kind = "integer"
    any_dtype_outputs = True
    knobs = {
        "BLOCK_SIZE": ("1024", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        found = integer_op(node)
        return None if found is None else (found, {})

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_integer(plan, group, genome)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        op = group.ops[group.members[0]]
        operands = [op.args["input"]] + ([op.args["other"]] if "other" in op.args else [])
        tensors = [v for v in operands if _is_tensor(v)]
        return tensors + [v for v in operands if isinstance(v, torch.fx.Node) and v not in tensors], \
            group_outputs(plan, group)
