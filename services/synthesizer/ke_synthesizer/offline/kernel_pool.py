"""Pooling (max / avg, 1-D and 2-D) as a direct Triton kernel: one lane per output
element walks its KH x KW window (unrolled, sizes are compile-time constants), and
any following pointwise ops of the same shape run as an epilogue on the pooled value.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from .capture import dtype_of, shape_of
from .launch_helpers import tuple_source
from .lower_pointwise import PointwiseEmitter, literal
from .ops import NormOp

if TYPE_CHECKING:
    from .graph import Group, Plan

_FUNCS = {F.max_pool1d: ("max", 1), F.max_pool2d: ("max", 2), F.avg_pool1d: ("avg", 1), F.avg_pool2d: ("avg", 2)}
_MODULES = {nn.MaxPool1d: ("max", 1), nn.MaxPool2d: ("max", 2), nn.AvgPool1d: ("avg", 1), nn.AvgPool2d: ("avg", 2)}
_ARGS = {
    "max": ["input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"],
    "avg": ["input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"],
}


def _pair(v: Any, nd: int) -> tuple[int, ...] | None:
    if isinstance(v, int):
        return (v,) * nd
    if isinstance(v, (list, tuple)) and len(v) == nd and all(isinstance(i, int) for i in v):
        return tuple(v)
    return None


def pool_op(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    """A pooling node as NormOp('pool', ...) with static window parameters, or None."""
    if node.op == "call_function" and node.target in _FUNCS:
        kind, nd = _FUNCS[node.target]  # type: ignore[index]
        names = _ARGS[kind]
        args = dict(zip(names, node.args, strict=False))
        args.update(node.kwargs)
    elif node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _MODULES:
        mod = gm.get_submodule(str(node.target))
        kind, nd = _MODULES[type(mod)]
        args = {n: getattr(mod, n) for n in _ARGS[kind][1:] if hasattr(mod, n)}
        args["input"] = node.args[0]
    else:
        return None
    x = args.get("input")
    shape = shape_of(x)
    if shape is None or len(shape) not in (nd + 1, nd + 2) or dtype_of(x) not in (torch.float32, torch.float16,
                                                                                   torch.bfloat16):
        return None
    k = _pair(args.get("kernel_size"), nd)
    s = _pair(args.get("stride") or args.get("kernel_size"), nd)
    p = _pair(args.get("padding", 0), nd)
    if k is None or s is None or p is None or args.get("ceil_mode", False) or args.get("return_indices", False):
        return None
    if kind == "max" and _pair(args.get("dilation", 1), nd) != (1,) * nd:
        return None
    if kind == "avg" and args.get("divisor_override") is not None:
        return None
    if nd == 1:
        k, s, p = (1,) + k, (1,) + s, (0,) + p
    return NormOp("pool", {"input": x}, extra={"kind": kind, "nd": nd, "k": k, "s": s, "p": p,
                                               "count_include_pad": bool(args.get("count_include_pad", True))})


def gen_pool(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    from .graph import group_outputs
    from .kernel_pointwise import epilogue_operands, kernel_name, load_cast, operand_shape

    pool = group.members[0]
    e = group.ops[pool].extra
    (kh, kw), (sh, sw), (ph, pw) = e["k"], e["s"], e["p"]
    ext, scalars = epilogue_operands(plan, group)
    outs = group_outputs(plan, group)
    block = int(genome.get(f"{group.key}.BLOCK_SIZE", "1024"))
    warps = int(genome.get(f"{group.key}.num_warps", "4"))
    name = kernel_name(group, "pool")
    is_max = e["kind"] == "max"
    init = 'float("-inf")' if is_max else "0.0"

    def val(v: Any) -> str:
        if isinstance(v, torch.fx.Node) and plan.group_of.get(v) is group:
            return f"v_{v.name}"
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            return f"e{ext.index(v)}"
        if isinstance(v, torch.fx.Node):
            return f"s{scalars.index(v)}"
        lit = literal(v)
        if lit is None:
            raise ValueError(f"unsupported operand {v!r}")
        return lit

    rank = len(group.shape)
    full = [operand_shape(plan, v) == group.shape for v in ext]
    bcast = [i for i in range(len(ext)) if not full[i]]
    sig = ["x_ptr"] + [f"e{i}_ptr" for i in range(len(ext))] + [f"out{j}_ptr" for j in range(len(outs))]
    sig += ["n_out", "H", "W", "OH", "OW"]
    sig += [f"d{k}" for k in range(1, rank - e["nd"]) if bcast]  # leading output dims (unravel)
    sig += [f"e{i}_s{k}" for i in bcast for k in range(rank)]
    sig += [f"s{i}" for i in range(len(scalars))]
    fused = " -> ".join(f"{e['kind']}_pool" if m is pool else group.ops[m].op for m in group.members)
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", "    BLOCK_SIZE: tl.constexpr,", "):",
             f"    # Fuses {fused}: each lane reduces one {kh}x{kw} window (stride {sh}x{sw}, padding {ph}x{pw}).",
             "    pid = tl.program_id(0)",
             "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
             "    mask = offs < n_out",
             "    ow = offs % OW",
             "    oh = (offs // OW) % OH",
             "    plane = offs // (OW * OH)",
             "    base = plane * H * W",
             f"    acc = tl.full([BLOCK_SIZE], {init}, tl.float32)",
             "    count = tl.zeros([BLOCK_SIZE], dtype=tl.float32)",
             f"    for kh in tl.static_range({kh}):",
             f"        for kw in tl.static_range({kw}):",
             f"            ih = oh * {sh} - {ph} + kh",
             f"            iw = ow * {sw} - {pw} + kw",
             "            inside = mask & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)",
             f"            v = tl.load(x_ptr + base + ih * W + iw, mask=inside, other={init})"
             f"{load_cast(dtype_of(group.ops[pool].args['input']))}",
             f"            acc = {'tl.maximum(acc, v)' if is_max else 'acc + v'}",
             "            count += tl.where(inside, 1.0, 0.0)"]
    if is_max:
        lines.append(f"    v_{pool.name} = acc")
    elif e["count_include_pad"]:
        # windows never leave the padded input (no ceil_mode): the divisor is the window size
        lines.append(f"    v_{pool.name} = acc / {float(kh * kw)!r}")
    else:
        lines.append(f"    v_{pool.name} = acc / tl.maximum(count, 1.0)")
    # epilogue operands of the output's shape are read flat; broadcast ones (a per-channel
    # shift, ...) through the strides of their expanded view, the plane index unravelled
    lead = rank - e["nd"]
    if bcast:
        lines.append("    rem = plane")
        for k in reversed(range(lead)):
            lines += [f"    i{k} = rem % d{k}", f"    rem = rem // d{k}"] if k else ["    i0 = rem"]
    idx = [f"i{k}" for k in range(lead)] + (["ow"] if e["nd"] == 1 else ["oh", "ow"])
    for i, v in enumerate(ext):
        dt = dtype_of(v) if isinstance(v, torch.fx.Node) else torch.float32
        addr = "offs" if full[i] else " + ".join(f"{x} * e{i}_s{k}" for k, x in enumerate(idx))
        lines.append(f"    e{i} = tl.load(e{i}_ptr + {addr}, mask=mask, other=0){load_cast(dt)}")
    for m in group.members[1:]:
        expr = emitter.emit(group.ops[m], val)
        if expr is None:
            raise ValueError(f"cannot emit {group.ops[m].op}")
        lines.append(f"    v_{m.name} = {expr}")
    for j, m in enumerate(outs):
        lines.append(f"    tl.store(out{j}_ptr + offs, v_{m.name}, mask=mask)")
    kernel = "\n".join(lines) + "\n"

    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan", "", ""]
    params = ["x"] + [f"e{i}" for i in range(len(ext))]
    ll.append(f"def _plan_{name}({', '.join(params)}):")
    if e["nd"] == 1:
        ll += ["    h, w = 1, x.shape[-1]"]
    else:
        ll += ["    h, w = x.shape[-2], x.shape[-1]"]
    ll += [f"    oh = (h + 2 * {ph} - {kh}) // {sh} + 1",
           f"    ow = (w + 2 * {pw} - {kw}) // {sw} + 1",
           f"    shape = (*x.shape[:-{e['nd']}], {'ow' if e['nd'] == 1 else 'oh, ow'})"]
    ll += [f"    if _broadcast_shape(shape, e{i}.shape) != shape:\n"
           f"        raise RuntimeError(f'{name}: epilogue operand {{tuple(e{i}.shape)}} does not broadcast to "
           f"{{shape}}')" for i in range(len(ext))]
    ll += ["    n = math.prod(shape)",
           f"    block = min({block}, _pow2(n))",
           "    grid = ((n + block - 1) // block,) if n > 0 else None",
           "    tail = (n, h, w, oh, ow)" + (f" + shape[1:{rank - e['nd']}]" if bcast else "")]
    ll += [f"    tail += _expanded_strides(shape, e{i}.shape, e{i}.stride())" for i in bcast]
    ll += [f"    materialise = {' or '.join(f'e{i}.shape != shape' for i in range(len(ext)) if full[i]) or 'False'}",
           "    return shape, materialise, grid, block, tail", "", ""]
    key = tuple_source(["x.shape"] + [p for i in range(len(ext)) for p in ([f"e{i}.shape"] if full[i] else
                                                                         [f"e{i}.shape", f"e{i}.stride()"])])
    ll += [f"def launch_{name}({', '.join(params + [f's{i}' for i in range(len(scalars))])}):",
           f"    key = {key}",
           f"    plan = _plans_{name}.get(key)",
           "    if plan is None:",
           f"        plan = _remember(_plans_{name}, key, _plan_{name}({', '.join(params)}))",
           "    shape, materialise, grid, block, tail = plan",
           "    x = x.contiguous()"]
    fulls = [i for i in range(len(ext)) if full[i]]
    if fulls:
        ll.append("    if materialise:  # same-shape epilogue operands that broadcast at run time")
        ll += [f"        e{i} = e{i}.expand(shape)" for i in fulls]
        ll += [f"    e{i} = e{i}.contiguous()" for i in fulls]
    call = ["x"] + [f"e{i}" for i in range(len(ext))]
    for j, m in enumerate(outs):
        ll.append(f"    out{j} = torch.empty(shape, device=x.device, dtype={dtype_of(m) or torch.float32})")
        call.append(f"out{j}")
    call += ["*tail"] + [f"s{i}" for i in range(len(scalars))]
    ll += ["    if grid is not None:",
           f"        {name}[grid]({', '.join(call)}, BLOCK_SIZE=block, num_warps={warps})",
           f"    return {', '.join(f'out{j}' for j in range(len(outs)))}"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


def pool_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    from .graph import group_outputs
    from .kernel_pointwise import epilogue_operands

    ext, scalars = epilogue_operands(plan, group)
    return [group.ops[group.members[0]].args["input"]] + ext + scalars, group_outputs(plan, group)
