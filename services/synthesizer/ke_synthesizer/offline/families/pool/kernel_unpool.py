"""Max unpooling (``F.max_unpool1d / 2d / 3d`` and the modules): the partial inverse of a
max pool. The output starts as zeros (allocated so by the launcher) and one lane per
input element stores its value at its index, flat within the output plane, as the max
pool with ``return_indices`` numbers them. Indices outside the plane are skipped (torch
raises on them). Two input elements with one index (overlapping windows that chose the
same maximum) carry the same value, so the order of their stores does not matter.

Its own family, without epilogue: a consumer of the output reads every element, the
zeros included, which a scatter never visits.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevolve.errors import LoweringError

from ...emit.launch_helpers import cached_plan_lines
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import kernel_name
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

_FUNCS = {F.max_unpool1d: 1, F.max_unpool2d: 2, F.max_unpool3d: 3}
_MODULES = {nn.MaxUnpool1d: 1, nn.MaxUnpool2d: 2, nn.MaxUnpool3d: 3}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _tuple(v: Any, nd: int) -> tuple[int, ...] | None:
    if isinstance(v, int):
        return (v,) * nd
    if isinstance(v, (list, tuple)) and len(v) == nd and all(isinstance(i, int) for i in v):
        return tuple(v)
    return None


def unpool_op(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    names = ["input", "indices", "kernel_size", "stride", "padding", "output_size"]
    if node.op == "call_function" and node.target in _FUNCS:
        nd = _FUNCS[node.target]  # type: ignore[index]
        a: dict[str, Any] = dict(zip(names, node.args, strict=False))
        a.update(node.kwargs)
    elif node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _MODULES:
        mod: Any = gm.get_submodule(str(node.target))
        nd = _MODULES[type(mod)]
        a = {"kernel_size": mod.kernel_size, "stride": mod.stride, "padding": mod.padding}
        a.update(dict(zip(names[:2] + names[5:], node.args, strict=False)))
        a.update(node.kwargs)
    else:
        return None
    x, idx = a.get("input"), a.get("indices")
    shape = shape_of(x)
    if shape is None or len(shape) not in (nd + 1, nd + 2) or dtype_of(x) not in _FLOATS:
        return None
    if shape_of(idx) != shape or dtype_of(idx) != torch.int64:
        return None
    k = _tuple(a.get("kernel_size"), nd)
    s = _tuple(a.get("stride") if a.get("stride") is not None else a.get("kernel_size"), nd)
    p = _tuple(a.get("padding", 0), nd)
    size = a.get("output_size")
    if k is None or s is None or p is None:
        return None
    if size is not None:
        size = tuple(size)[-nd:]
        if len(size) != nd or not all(isinstance(v, int) for v in size):
            return None
    return NormOp("max_unpool", {"input": x, "indices": idx},
                  extra={"nd": nd, "k": k, "s": s, "p": p, "size": size})


def gen_unpool(plan: Plan, group: Group, genome: dict[str, str]) -> Emitted:
    node = group.members[0]
    e = group.ops[node].extra
    if len(group.members) != 1:
        raise LoweringError("max_unpool: a fused group")
    nd = e["nd"]
    name = kernel_name(group, "unpool")
    block = int(UnpoolFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(UnpoolFamily.value(genome, group, "num_warps"))
    kernel = "\n".join([
        "@triton.jit",
        f"def {name}(",
        "    x_ptr, idx_ptr, out_ptr, n_in, IN_PLANE, OUT_PLANE,",
        "    BLOCK_SIZE: tl.constexpr,",
        "):",
        f"    # max_unpool{nd}d: each lane stores its value at its index within its output plane",
        "    pid = tl.program_id(0)",
        "    offs = pid.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
        "    mask = offs < n_in",
        "    plane = offs // IN_PLANE",
        "    idx = tl.load(idx_ptr + offs, mask=mask, other=-1)",
        "    v = tl.load(x_ptr + offs, mask=mask, other=0.0)",
        "    ok = mask & (idx >= 0) & (idx < OUT_PLANE)",
        "    tl.store(out_ptr + plane * OUT_PLANE + idx, v, mask=ok)",
    ]) + "\n"
    if e["size"] is not None:
        sizes = [f"    o{j} = {v}" for j, v in enumerate(e["size"])]
    else:  # torch's default: (in - 1) * stride - 2 * padding + kernel
        sizes = [f"    o{j} = (x.shape[{j - nd}] - 1) * {e['s'][j]} - 2 * {e['p'][j]} + {e['k'][j]}" for j in range(nd)]
    out_sizes = ", ".join(f"o{j}" for j in range(nd))
    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan", "", "",
          f"def _plan_{name}(x):", *sizes,
          f"    shape = (*x.shape[:-{nd}], {out_sizes})",
          f"    n, in_plane = x.numel(), max(math.prod(x.shape[-{nd}:]), 1)",
          f"    block = min({block}, _pow2(max(n, 1)))",
          "    grid = ((n + block - 1) // block,) if n > 0 else None",
          f"    return shape, grid, block, (n, in_plane, math.prod(({out_sizes},)))", "", "",
          f"def launch_{name}(x, indices):"]
    ll += cached_plan_lines(f"_plans_{name}", "(x.shape,)", f"_plan_{name}(x)", "shape, grid, block, tail")
    ll += ["    x = x.contiguous()",
           "    indices = indices.contiguous()",
           "    out = torch.zeros(shape, device=x.device, dtype=x.dtype)  # unvisited positions are zero",
           "    if grid is not None:",
           f"        {name}[grid](x, indices, out, *tail, BLOCK_SIZE=block, num_warps={warps})",
           "    return out"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


class UnpoolFamily(KernelFamily):
    """max_unpool 1-3 d: a scatter of values to their pooled indices over zeros."""

    kind = "unpool"
    knobs = {
        "BLOCK_SIZE": ("1024", "256", "4096"),
        "num_warps": ("4", "1", "8"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        found = unpool_op(node, ctx.gm) if op is None else None
        return None if found is None else (found, {})

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_unpool(plan, group, genome)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        node = group.members[0]
        op = group.ops[node]
        return [op.args["input"], op.args["indices"]], [node]
