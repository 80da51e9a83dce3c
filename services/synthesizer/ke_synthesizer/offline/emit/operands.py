"""The operand and epilogue toolkit every family emits with: operand shapes (parameters
too), 0-d constants inlined as literals, kernel names, fp32 load casts, and the fused
pointwise epilogue after a group's first member (its operands, its kernel lines, its
launcher plan lines). Pointwise, row, matmul, conv, convnd, pool and attention kernels
share it, so it lives here rather than in one family (families never import each other).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ..frontend.fx_meta import dtype_of, shape_of
from ..plan.plan import Group, Plan, node_inputs
from .lower_pointwise import PointwiseEmitter, literal

TL_DTYPES = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
             torch.float64: "tl.float64"}


def param_shape(plan: Plan, path: str) -> tuple[int, ...]:
    obj: Any = plan.spec.model
    for part in path.split("."):
        obj = getattr(obj, part)
    return tuple(obj.shape)


def operand_shape(plan: Plan, v: Any) -> tuple[int, ...] | None:
    if isinstance(v, str) and v.startswith("@"):
        return param_shape(plan, v[1:])
    return shape_of(v)


def inline_constant(plan: Plan, v: Any) -> float | None:
    """A 0-d floating-point tensor created inside the reference forward (``torch.tensor(-0.5)``,
    fx: a ``_tensor_constantN`` attribute) as a Python float: kernels read it as a literal
    (same type promotion as a Python scalar), so the forward never rebuilds it per call (on
    a GPU a blocking host-to-device copy)."""
    if not (isinstance(v, torch.fx.Node) and v.op == "get_attr"):
        return None
    path = str(v.target)
    if not path.split(".")[-1].startswith("_tensor_constant"):
        return None
    obj: Any = plan.spec.gm
    for part in path.split("."):
        obj = getattr(obj, part, None)
    if isinstance(obj, torch.Tensor) and obj.dim() == 0 and obj.is_floating_point():
        return float(obj)
    return None


def is_tensor_operand(plan: Plan, v: Any) -> bool:
    """A tensor the kernel loads (a parameter path or a node with a shape), not a constant."""
    if isinstance(v, str):
        return True
    return isinstance(v, torch.fx.Node) and shape_of(v) is not None and inline_constant(plan, v) is None


def epilogue_operands(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    """External tensor operands and runtime scalars of the pointwise epilogue fused after a
    group's anchor op (members after the first), each once, in first-use order."""
    ext: list[Any] = []
    scalars: list[torch.fx.Node] = []
    for m in group.members[1:]:
        for v in node_inputs(group.ops[m]):
            if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
                continue
            if is_tensor_operand(plan, v):
                if v not in ext:
                    ext.append(v)
            elif isinstance(v, torch.fx.Node) and inline_constant(plan, v) is None and v not in scalars:
                scalars.append(v)
    return ext, scalars


def kernel_name(group: Group, prefix: str) -> str:
    names: list[str] = []
    for m in group.members:
        op = group.ops[m].op
        if op not in names and op != "identity":
            names.append(op)
    body = "_".join(names[:4]) + ("_etc" if len(names) > 4 else "")
    return f"{prefix}_{body or 'copy'}_{group.gid}"


def load_cast(dtype: torch.dtype | None) -> str:
    return ".to(tl.float32)" if dtype in TL_DTYPES else ""


def epilogue_value(plan: Plan, group: Group, ext: list[Any], scalars: list[torch.fx.Node]) -> Any:
    """The in-kernel expression of an epilogue op's argument, for kernels whose epilogue
    operands come from ``epilogue_operands`` (conv, pool, ...): a member's value, an extra
    operand ``e<i>``, a runtime scalar ``s<i>`` or a literal."""

    def val(v: Any) -> str:
        if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
            return f"v_{v.name}"
        const = inline_constant(plan, v)
        if const is not None:  # torch.tensor(c) made in the forward: a literal, as epilogue_operands skips it
            return str(literal(const))
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            return f"e{ext.index(v)}"
        if isinstance(v, torch.fx.Node):
            return f"s{scalars.index(v)}"
        lit = literal(v)
        if lit is None:
            raise LoweringError(f"unsupported operand {v!r}")
        return lit

    return val


# Launcher side of the same epilogue operands: operands of the output's shape (``full``) are
# read at the output's offsets (materialised when they only broadcast to it at run time);
# the others through the strides of their expanded view, appended to the kernel's tail.

def epilogue_broadcast_checks(name: str, n_ext: int) -> list[str]:
    """Plan lines: every epilogue operand must broadcast to the output ``shape``."""
    return [f"    if _broadcast_shape(shape, e{i}.shape) != shape:\n"
            f"        raise RuntimeError(f'{name}: epilogue operand {{tuple(e{i}.shape)}} does not broadcast to "
            f"{{shape}}')" for i in range(n_ext)]


def epilogue_plan_lines(full: list[bool]) -> list[str]:
    """Plan lines after ``tail``: broadcast operands' expanded strides, and ``materialise``."""
    fulls = [i for i, f in enumerate(full) if f]
    return ([f"    tail += _expanded_strides(shape, e{i}.shape, e{i}.stride())" for i, f in enumerate(full) if not f]
            + [f"    materialise = {' or '.join(f'e{i}.shape != shape' for i in fulls) or 'False'}"])


def epilogue_key_parts(full: list[bool]) -> list[str]:
    """Launch-cache key parts of the epilogue operands (strides too where they are read)."""
    return [p for i, f in enumerate(full) for p in ([f"e{i}.shape"] if f else [f"e{i}.shape", f"e{i}.stride()"])]


def epilogue_materialise_lines(full: list[bool], channels_last: bool = False) -> list[str]:
    """Launch lines: same-shape operands that broadcast at run time expanded, then all of
    them dense in the output's layout (read at the output's offsets; ``channels_last``
    for an output written NHWC)."""
    fulls = [i for i, f in enumerate(full) if f]
    if not fulls:
        return []
    fmt = "memory_format=torch.channels_last" if channels_last else ""
    return (["    if materialise:  # same-shape epilogue operands that broadcast at run time"]
            + [f"        e{i} = e{i}.expand(shape)" for i in fulls]
            + [f"    e{i} = e{i}.contiguous({fmt})" for i in fulls])


def epilogue_lines(group: Group, emitter: PointwiseEmitter, val: Any, ext: list[Any], full: list[bool],
                   idx: list[str], offsets: str, outs: list[torch.fx.Node]) -> list[str]:
    """Kernel lines of a fused pointwise epilogue after the group's first member (conv,
    pool, ...): load the extra operands (``offsets`` for those of the output's shape, the
    strides of their expanded view over index expressions ``idx`` for broadcast ones),
    compute the other members, store the outputs at ``offsets``."""
    lines = []
    for i, v in enumerate(ext):
        dt = dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32
        addr = offsets if full[i] else " + ".join(f"{x} * e{i}_s{k}" for k, x in enumerate(idx))
        lines.append(f"    e{i} = tl.load(e{i}_ptr + {addr}, mask=mask, other=0){load_cast(dt)}")
    for m in group.members[1:]:
        expr = emitter.emit(group.ops[m], val)
        if expr is None:
            raise LoweringError(f"cannot emit {group.ops[m].op}")
        lines.append(f"    v_{m.name} = {expr}")
    for j, m in enumerate(outs):
        lines.append(f"    tl.store(out{j}_ptr + {offsets}, v_{m.name}, mask=mask)")
    return lines
