"""Code generation for flat pointwise groups: one masked 1-D kernel per group.

Operands with the output's shape are read with the flat index (made contiguous by the
launcher); broadcast operands (bias over the last dim, per-channel scales, ...) are read
through their expanded strides, unravelling the flat index over the runtime shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from .capture import dtype_of, shape_of
from .graph import Group, Plan, group_outputs, node_inputs
from .lower_pointwise import PointwiseEmitter, literal

TL_DTYPES = {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
             torch.float64: "tl.float64"}


@dataclass
class Operands:
    """External operands of a group, in kernel-argument order."""

    tensors: list[Any] = field(default_factory=list)  # fx Node or "@param.path"
    scalars: list[torch.fx.Node] = field(default_factory=list)

    def tensor_index(self, v: Any) -> int:
        if v not in self.tensors:
            self.tensors.append(v)
        return self.tensors.index(v)

    def scalar_index(self, v: torch.fx.Node) -> int:
        if v not in self.scalars:
            self.scalars.append(v)
        return self.scalars.index(v)


def param_shape(plan: Plan, path: str) -> tuple[int, ...]:
    obj: Any = plan.spec.model
    for part in path.split("."):
        obj = getattr(obj, part)
    return tuple(obj.shape)


def operand_shape(plan: Plan, v: Any) -> tuple[int, ...] | None:
    if isinstance(v, str) and v.startswith("@"):
        return param_shape(plan, v[1:])
    return shape_of(v)


def collect_operands(plan: Plan, group: Group) -> Operands:
    ops = Operands()
    for m in group.members:
        for v in node_inputs(group.ops[m]):
            if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
                continue
            if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
                ops.tensor_index(v)
            elif isinstance(v, torch.fx.Node):
                ops.scalar_index(v)
    return ops


def epilogue_operands(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    """External tensor operands and runtime scalars of the pointwise epilogue fused after a
    group's anchor op (members after the first), each once, in first-use order."""
    ext: list[Any] = []
    scalars: list[torch.fx.Node] = []
    for m in group.members[1:]:
        for v in node_inputs(group.ops[m]):
            if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
                continue
            if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
                if v not in ext:
                    ext.append(v)
            elif isinstance(v, torch.fx.Node) and v not in scalars:
                scalars.append(v)
    return ext, scalars


def operand_value_fn(plan: Plan, group: Group, ops: Operands, load_names: dict[int, str]):
    """Map an op argument to its in-kernel expression."""

    def val(v: Any) -> str:
        if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
            return f"v_{v.name}"
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            return load_names[ops.tensor_index(v)]
        if isinstance(v, torch.fx.Node):
            return f"s{ops.scalar_index(v)}"
        lit = literal(v)
        if lit is None:
            raise ValueError(f"unsupported operand {v!r}")
        return lit

    return val


def kernel_name(group: Group, prefix: str) -> str:
    names: list[str] = []
    for m in group.members:
        op = group.ops[m].op
        if op not in names and op != "identity":
            names.append(op)
    body = "_".join(names[:4]) + ("_etc" if len(names) > 4 else "")
    return f"{prefix}_{body or 'copy'}_{group.gid}"


def persistent(lines: list[str], at: int, extent: str, block: str, tile: str) -> list[str]:
    """Turn a one-tile-per-program kernel body (from line ``at``, the program_id line)
    into a grid-stride loop: a fixed number of programs walk all tiles."""
    head, body = lines[:at], lines[at + 1:]
    loop = [f"    # persistent: programs stride over the {extent} / {block} tiles",
            f"    for {tile} in range(tl.program_id(0), tl.cdiv({extent}, {block}), tl.num_programs(0)):"]
    return head + loop + ["    " + line for line in body]


def load_cast(dtype: torch.dtype | None) -> str:
    return ".to(tl.float32)" if dtype in TL_DTYPES else ""


def gen_pointwise(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    """Returns (kernel source, launcher source, launcher name)."""
    ops = collect_operands(plan, group)
    outs = group_outputs(plan, group)
    rank = len(group.shape)
    full = [operand_shape(plan, v) == group.shape for v in ops.tensors]
    name = kernel_name(group, "pointwise")
    block = int(genome.get(f"{group.key}.BLOCK_SIZE", "1024"))
    warps = int(genome.get(f"{group.key}.num_warps", "4"))

    in_ptrs = [f"in{i}_ptr" for i in range(len(ops.tensors))]
    out_ptrs = [f"out{j}_ptr" for j in range(len(outs))]
    dims = [f"d{k}" for k in range(rank)]
    strides = [f"in{i}_s{k}" for i in range(len(ops.tensors)) if not full[i] for k in range(rank)]
    scalars = [f"s{i}" for i in range(len(ops.scalars))]
    sig = in_ptrs + out_ptrs + ["n_elements"] + (dims if not all(full) else []) + strides + scalars
    fused = " -> ".join(group.ops[m].op for m in group.members)
    lines = [
        "@triton.jit",
        f"def {name}(",
        f"    {', '.join(sig)},",
        "    BLOCK_SIZE: tl.constexpr,",
        "):",
        f"    # Fuses {fused}: each input read once, each output written once.",
        "    pid = tl.program_id(0)",
        "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
        "    mask = offs < n_elements",
    ]
    if not all(full):
        lines.append("    # Unravel the flat index over the output shape for broadcast operands.")
        lines.append("    rem = offs")
        for k in reversed(range(rank)):
            if k == 0:
                lines.append("    i0 = rem")
            else:
                lines.append(f"    i{k} = rem % d{k}")
                lines.append(f"    rem = rem // d{k}")
    load_names: dict[int, str] = {}
    for i, v in enumerate(ops.tensors):
        load_names[i] = f"a{i}"
        if full[i]:
            addr = f"in{i}_ptr + offs"
        else:
            terms = " + ".join(f"i{k} * in{i}_s{k}" for k in range(rank)) or "0 * offs"
            addr = f"in{i}_ptr + {terms}"
        cast = load_cast(dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32)
        lines.append(f"    a{i} = tl.load({addr}, mask=mask, other=0){cast}")
    val = operand_value_fn(plan, group, ops, load_names)
    for m in group.members:
        expr = emitter.emit(group.ops[m], val)
        lines.append(f"    v_{m.name} = {expr}")
    for j, m in enumerate(outs):
        lines.append(f"    tl.store(out{j}_ptr + offs, v_{m.name}, mask=mask)")
    programs = genome.get(f"{group.key}.programs", "grid")
    if programs != "grid":
        lines = persistent(lines, lines.index("    pid = tl.program_id(0)"), "n_elements", "BLOCK_SIZE", "pid")
    kernel = "\n".join(lines) + "\n"

    # Launcher: computes the runtime output shape, allocates, picks the block, launches.
    params = [f"t{i}" for i in range(len(ops.tensors))] + scalars
    launcher = f"launch_{name}"
    ll = [f"def {launcher}({', '.join(params)}):"]
    shapes = ", ".join(f"t{i}.shape" for i in range(len(ops.tensors)))
    ll.append(f"    shape = torch.broadcast_shapes({shapes})")
    call_args: list[str] = []
    for i in range(len(ops.tensors)):
        if full[i]:
            ll.append(f"    t{i} = t{i}.expand(shape).contiguous()")
        else:
            ll.append(f"    t{i} = t{i}.expand(shape)  # broadcast: read through zero strides")
        call_args.append(f"t{i}")
    for j, m in enumerate(outs):
        dt = dtype_of(m) or torch.float32
        ll.append(f"    out{j} = torch.empty(shape, device=t0.device, dtype={dt})")
        call_args.append(f"out{j}")
    ll.append("    n = out0.numel()")
    call_args.append("n")
    if not all(full):
        call_args += [f"shape[{k}]" for k in range(rank)]
        call_args += [f"t{i}.stride({k})" for i in range(len(ops.tensors)) if not full[i] for k in range(rank)]
    call_args += scalars
    ll.append(f"    block = min({block}, triton.next_power_of_2(max(n, 1)))")
    ll.append("    if n > 0:")
    if programs == "grid":
        ll.append("        grid = (triton.cdiv(n, block),)")
    else:
        ll.append(f"        grid = (min(triton.cdiv(n, block), {int(programs)}),)  # persistent programs")
    ll.append(f"        {name}[grid]({', '.join(call_args)}, BLOCK_SIZE=block, num_warps={warps})")
    ll.append(f"    return {', '.join(f'out{j}' for j in range(len(outs)))}")
    return kernel, "\n".join(ll) + "\n", launcher


def launcher_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    ops = collect_operands(plan, group)
    return list(ops.tensors) + list(ops.scalars), group_outputs(plan, group)
