"""Scatters: index_add, index_copy, scatter_add, scatter (a source tensor or a scalar).

The output starts as a copy of the destination; then each source element goes to the
address its index names. Where indices collide:

- ``collide`` = ``atomic`` (default): one lane per source element adds with
  ``tl.atomic_add`` (index_add, scatter_add) or stores (index_copy, scatter: the winner
  among colliding writes is unspecified, as torch documents for these ops). Float sums
  then depend on the order the atomics land in, as torch's CUDA kernels do (they use
  atomicAdd too); integer sums are exact in any order.
- ``collide`` = ``ordered`` (index_add and scatter_add of floats): one lane per output
  element walks the indices in order and adds the sources that name it, the order of
  torch's CPU loop (deterministic, and bitwise torch's CPU result in fp32), at
  O(output x index length) work instead of O(source): for short index lists or where
  run-to-run reproducibility matters.

A scatter group holds its op alone: nothing fuses after it (every source must have
landed before anything reads the output).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.coords import unravel_lines
from ...emit.grid import program_id_lines, wide_offsets
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import kernel_name, operand_shape
from ...frontend.fx_meta import dtype_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised, narrowed
from .gather_body import load
from .index_ops import index_op

_ADDS = ("index_add", "scatter_add")


def _value_lines(e: dict[str, Any], coords: list[str], mask: str, dtype: torch.dtype | None) -> list[str]:
    if e["scalar"] is not None:
        v = int(e["scalar"]) if dtype is not None and not dtype.is_floating_point else float(e["scalar"])
        return [f"    v = tl.zeros([BLOCK_SIZE], dtype=tl.int32) + {v!r}"]
    lines = [f"    v = {load(2, coords, mask)}"]
    if e["alpha"] != 1:
        alpha = e["alpha"] if dtype is not None and dtype.is_floating_point else int(e["alpha"])
        lines.append(f"    v = v * {alpha!r}")
    return lines


def gen_scatter(plan: Plan, group: Group, genome: dict[str, str]) -> Emitted:
    node = group.members[0]
    e = group.ops[node].extra
    kind, d = e["kind"], e["dim"]
    shape = operand_shape(plan, e["sources"][0]) or ()
    r = len(shape)
    dtype = dtype_of(node)
    if dtype is None or dtype == torch.bool and kind in _ADDS:
        raise LoweringError("scatter: no atomic add of booleans")
    ordered = ScatterFamily.value(genome, group, "collide") == "ordered"
    block = int(ScatterFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(ScatterFamily.value(genome, group, "num_warps"))
    name = kernel_name(group, f"scatter_{kind}")
    k = len(e["sources"])
    per_index = kind in ("index_add", "index_copy")  # a 1-D index along dim d
    sig = [f"x{i}_ptr" for i in range(k)] + ["out_ptr", "n", "I"] + [f"S{j}" for j in range(r)]
    sig += [f"P{j}" for j in range(r)] + [f"O{j}" for j in range(r)]
    ranks = [r, 1 if per_index else r] + ([r] if k > 2 else [])
    sig += [f"x{i}_s{j}" for i in range(k) for j in range(ranks[i])]
    o = [f"o{j}" for j in range(r)]
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", "    BLOCK_SIZE: tl.constexpr,", "):",
             *program_id_lines(["pid"], wide=wide_offsets(group)),
             "    offs = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)",
             "    mask = offs < n"]
    if ordered:
        # one lane per output element (sizes S); the indices walked in order
        lines.insert(5, f"    # {kind}, ordered: each lane adds, in index order, the sources naming it")
        lines += unravel_lines(r, "S")
        at = [("i" if j == d else o[j]) for j in range(r)]
        lines += [f"    acc = {load(0, o)}" + (".to(tl.float32)" if dtype.is_floating_point else ""),
                  "    for i in range(I):"]
        if per_index:
            lines += ["        j = tl.load(x1_ptr + i * x1_s0)", f"        hit = mask & (j == o{d})"]
        else:
            inb = " & ".join(["mask"] + [f"(o{j} < P{j})" for j in range(r) if j != d])
            lines += [f"        inb = {inb}", f"        j = {load(1, at, 'inb')}", f"        hit = inb & (j == o{d})"]
        lines += [f"    {ln}" for ln in _value_lines(e, at, "hit", dtype)]
        lines += ["        acc = tl.where(hit, acc + v, acc)", "    tl.store(out_ptr + offs, acc, mask=mask)"]
    else:
        # one lane per source element (sizes P: the source's, or the index's)
        lines.insert(5, f"    # {kind}: each lane sends one source element to its index")
        lines += unravel_lines(r, "P")
        j = load(1, [o[d]]) if per_index else load(1, o)
        dest = " + ".join(f"j * O{m}" if m == d else f"o{m} * O{m}" for m in range(r))
        lines += [f"    j = {j}", *_value_lines(e, o, "mask", dtype), f"    dest = {dest}"]
        if kind in _ADDS:
            lines.append("    tl.atomic_add(out_ptr + dest, v, mask=mask)")
        else:
            lines.append("    tl.store(out_ptr + dest, v, mask=mask)")
    kernel = "\n".join(lines) + "\n"

    params = [f"x{i}" for i in range(k)]
    # P: the sizes walked per source element (the source's for index_*, the index's for scatter*)
    walked = "x2.shape" if per_index else "x1.shape"
    ll = [f"def launch_{name}({', '.join(params)}):"]
    if per_index:
        ll.append("    x1 = x1.reshape(-1)")
    ll.append("    out = x0.clone(memory_format=torch.contiguous_format)" if not ordered
              else "    out = torch.empty(x0.shape, device=x0.device, dtype=x0.dtype)")
    ll += ["    count = out.numel()" if ordered else f"    count = {walked}.numel()",
           "    if count == 0:", "        return out",
           f"    sizes = tuple({walked})",
           "    I = x1.shape[0]" if per_index else f"    I = x1.shape[{d}]",
           f"    block = min({block}, _pow2(count))"]
    call = params + ["out", "count", "I", "*x0.shape", "*sizes", "*out.stride()"]
    call += [f"*x{i}.stride()" for i in range(k)]
    ll += [f"    {name}[((count + block - 1) // block,)]({', '.join(call)}, BLOCK_SIZE=block, num_warps={warps})",
           "    return out"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


class ScatterFamily(KernelFamily):
    """index_add / index_copy / scatter_add / scatter into a copy of the destination."""

    kind = "scatter"
    any_dtype_outputs = True
    knobs = {
        "collide": ("atomic", "ordered"),
        "BLOCK_SIZE": ("1024", "256", "512", "2048"),
        "num_warps": ("4", "1", "2", "8"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        if op is not None:
            return None
        found = index_op(node, ctx.gm)
        if found is None or found.extra["form"] != "scatter":
            return None
        floats = (dtype_of(node) or torch.bool).is_floating_point
        # ordered only changes float sums (integer atomics are exact in any order)
        allowed = ["atomic", "ordered"] if found.extra["kind"] in _ADDS and floats else ["atomic"]
        return found, {"allowed": {"collide": allowed}}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        return [(n, narrowed(group, n, c)) for n, c in self.knobs.items()
                if n != "collide" or len(narrowed(group, n, c)) > 1]

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_scatter(plan, group, genome)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return list(group.ops[group.members[0]].extra["sources"]), group_outputs(plan, group)
