"""Batch and instance norm in functional form, running statistics as inputs:
``F.batch_norm`` (training or eval), ``torch.native_batch_norm`` /
``torch._native_batch_norm_legit`` / ``aten._batch_norm_with_update`` (their
``(out, save_mean, save_invstd[, reserve])`` tuples) and ``F.instance_norm``.

In training mode PyTorch also updates the running statistics in place (``running = (1 -
momentum) * running + momentum * stat``, the variance unbiased; instance norm averages
its per-instance statistics over the batch first). The kernel writes them as torch does
(``UPDATE_RUNNING_STATS``): the evaluator compares a candidate's inputs after the call with
the reference's (``stages/checks.py``), so a kernel that left them unchanged is incorrect.

One program per channel walks its values: the mean, then the centred sum of squares (two
passes: no cancellation on data far from zero), then normalises and applies the affine;
instance norm does so per instance (the batch loop inside the program, so the running
statistics' mean over the batch stays in the program). The module forms are rewritten to
row kernels instead (``frontend/decompose.py``): they have no statistics to write.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from kernelevolve.errors import LoweringError

from ...emit.launch_helpers import cached_plan_lines
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import kernel_name
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

# write the running statistics in training mode, as torch does (see the module's docstring)
UPDATE_RUNNING_STATS = True
_SLOTS = ("input", "weight", "bias", "running_mean", "running_var")
# native_batch_norm / _native_batch_norm_legit's parameters in order
_NATIVE = ["input", "weight", "bias", "running_mean", "running_var", "training", "momentum", "eps"]


def _target_name(node: torch.fx.Node) -> str:
    t = node.target
    return str(getattr(t, "__name__", "")) if not isinstance(t, torch._ops.OpOverloadPacket) else t._qualified_op_name


def _bound(node: torch.fx.Node) -> dict[str, Any] | None:
    """The call's arguments by name, with ``kind`` (batch / instance), ``outputs`` (1:
    the output alone, 3: with the saved mean and invstd, 4: and an empty reserve)."""
    t, name = node.target, _target_name(node)
    if t is F.batch_norm:
        names = ["input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"]
        a: dict[str, Any] = {"training": False, "momentum": 0.1, "eps": 1e-5, "kind": "batch", "outputs": 1}
    elif t is F.instance_norm:
        names = ["input", "running_mean", "running_var", "weight", "bias", "training", "momentum", "eps"]
        a = {"training": True, "momentum": 0.1, "eps": 1e-5, "kind": "instance", "outputs": 1}
    elif t in (torch.native_batch_norm, torch._native_batch_norm_legit):
        names, a = _NATIVE, {"kind": "batch", "outputs": 3}
    elif name == "aten::_batch_norm_with_update":
        names = ["input", "weight", "bias", "running_mean", "running_var", "momentum", "eps"]
        a = {"training": True, "kind": "batch", "outputs": 4}
    else:
        return None
    a.update(zip(names, node.args, strict=False))
    kw = dict(node.kwargs)
    if t is F.instance_norm and "use_input_stats" in kw:
        kw["training"] = kw.pop("use_input_stats")
    if any(k not in names for k in kw):
        return None
    a.update(kw)
    return a


def batch_norm_op(node: torch.fx.Node) -> NormOp | None:
    if node.op != "call_function":
        return None
    a = _bound(node)
    if a is None:
        return None
    x = a.get("input")
    shape = shape_of(x)
    if shape is None or len(shape) < 2 or dtype_of(x) != torch.float32:
        return None
    c = shape[1]
    for k in _SLOTS[1:]:
        v = a.get(k)
        if v is not None and (shape_of(v) != (c,) or dtype_of(v) != torch.float32):
            return None
    train, m, eps = a.get("training"), a.get("momentum"), a.get("eps")
    if not isinstance(train, bool) or not isinstance(m, (int, float)) or not isinstance(eps, (int, float)):
        return None
    has_stats = a.get("running_mean") is not None and a.get("running_var") is not None
    if (a.get("running_mean") is None) != (a.get("running_var") is None) or (not train and not has_stats):
        return None
    if a["kind"] == "instance" and (not train or len(shape) < 3):
        return None  # instance norm with running statistics only (use_input_stats=False): library
    if a["outputs"] > 1 and not train:
        return None  # eval-mode native ops return empty saved statistics: library
    return NormOp("batch_norm", {k: a.get(k) for k in _SLOTS},
                  extra={"kind": a["kind"], "training": train, "momentum": float(m), "eps": float(eps),
                         "outputs": a["outputs"], "update": train and has_stats and UPDATE_RUNNING_STATS})


def gen_batch_norm(plan: Plan, group: Group, genome: dict[str, str]) -> Emitted:
    node = group.members[0]
    op = group.ops[node]
    e = op.extra
    if len(group.members) != 1:
        raise LoweringError("batch_norm: a fused group")
    name = kernel_name(group, "norm")
    block = int(NormFamily.value(genome, group, "BLOCK_SIZE"))
    warps = int(NormFamily.value(genome, group, "num_warps"))
    has = {k: op.args.get(k) is not None for k in _SLOTS}
    instance = e["kind"] == "instance"
    saved = e["outputs"] > 1
    what = "instance norm (per-instance statistics)" if instance else "batch norm (per-channel statistics)"
    lines = [
        "@triton.jit",
        f"def {name}(",
        "    x_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, out_ptr, mean_ptr, rstd_ptr, C, S, L, NSEG, momentum, eps,",
        "    BLOCK_SIZE: tl.constexpr,",
        "):",
        f"    # {what}, one program per channel: mean, centred variance, normalise + affine"
        + ("; writes the running statistics" if e["update"] else ""),
        "    c = tl.program_id(0)",
        "    cols = tl.arange(0, BLOCK_SIZE)",
        "    w = tl.load(w_ptr + c).to(tl.float32)" if has["weight"] else "    w = 1.0",
        "    b = tl.load(b_ptr + c).to(tl.float32)" if has["bias"] else "    b = 0.0",
        # a segment: every (n, s) of the channel (batch norm), or one instance's S values
    ]
    if e["update"]:
        lines += ["    sum_mean = tl.full([], 0.0, tl.float32)", "    sum_var = tl.full([], 0.0, tl.float32)"]
    lines += [
        "    for n in range(NSEG):",
        "        base = (n * C + c).to(tl.int64) * S",
    ]
    addr = "base + (i // S) * C * S + i % S"
    if e["training"]:
        lines += [
            "        acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)",
            "        for start in range(0, L, BLOCK_SIZE):",
            "            i = start + cols.to(tl.int64)",
            f"            acc += tl.load(x_ptr + {addr}, mask=i < L, other=0.0).to(tl.float32)",
            "        mean = tl.sum(acc, axis=0) / L",
            "        acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)",
            "        for start in range(0, L, BLOCK_SIZE):",
            "            i = start + cols.to(tl.int64)",
            f"            v = tl.load(x_ptr + {addr}, mask=i < L, other=0.0).to(tl.float32)",
            "            d = tl.where(i < L, v - mean, 0.0)",
            "            acc += d * d",
            "        var = tl.sum(acc, axis=0) / L",
            "        rstd = 1.0 / tl.sqrt(var + eps)",
        ]
        if e["update"]:
            lines += ["        sum_mean += mean",
                      "        sum_var += var * L / (L - 1)  # the running variance is unbiased"]
    else:
        lines += ["        mean = tl.load(rm_ptr + c).to(tl.float32)",
                  "        rstd = 1.0 / tl.sqrt(tl.load(rv_ptr + c).to(tl.float32) + eps)"]
    lines += [
        "        for start in range(0, L, BLOCK_SIZE):",
        "            i = start + cols.to(tl.int64)",
        f"            v = tl.load(x_ptr + {addr}, mask=i < L, other=0.0).to(tl.float32)",
        f"            tl.store(out_ptr + {addr}, (v - mean) * rstd * w + b, mask=i < L)",
    ]
    if saved:
        lines += ["        tl.store(mean_ptr + c, mean)", "        tl.store(rstd_ptr + c, rstd)"]
    if e["update"]:
        lines += [
            "    rm = tl.load(rm_ptr + c).to(tl.float32)",
            "    rv = tl.load(rv_ptr + c).to(tl.float32)",
            "    tl.store(rm_ptr + c, (1.0 - momentum) * rm + momentum * (sum_mean / NSEG))",
            "    tl.store(rv_ptr + c, (1.0 - momentum) * rv + momentum * (sum_var / NSEG))",
        ]
    kernel = "\n".join(lines) + "\n"

    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan", "", "",
          f"def _plan_{name}(x):",
          "    n, c = x.shape[0], x.shape[1]",
          "    s = math.prod(x.shape[2:])",
          # instance norm: N segments of S values; batch norm: one segment of N * S
          f"    nseg, length = {'(n, s)' if instance else '(1, n * s)'}",
          f"    block = min({block}, _pow2(max(length, 1)))",
          "    return (c,), (c, s, length, nseg), block", "", "",
          f"def launch_{name}(x, w, b, rm, rv):"]
    ll += cached_plan_lines(f"_plans_{name}", "(x.shape,)", f"_plan_{name}(x)", "grid, tail, block")
    ll += ["    x = x.contiguous()",
           "    out = torch.empty_like(x)"]
    if saved:
        ll += ["    mean = torch.empty(x.shape[1], device=x.device, dtype=x.dtype)",
               "    rstd = torch.empty(x.shape[1], device=x.device, dtype=x.dtype)"]
    else:
        ll += ["    mean = rstd = out  # not written"]
    if e["update"]:
        # the kernel writes the running statistics where they are (a strided one through a copy)
        ll += ["    rm_k = rm if rm.is_contiguous() else rm.contiguous()",
               "    rv_k = rv if rv.is_contiguous() else rv.contiguous()"]
    else:
        ll += ["    rm_k, rv_k = rm, rv"]
    args = ["x", "w if w is not None else x", "b if b is not None else x",
            "rm_k if rm_k is not None else x", "rv_k if rv_k is not None else x", "out", "mean", "rstd"]
    ll += ["    if x.numel() > 0:",
           f"        {name}[grid]({', '.join(args)}, *tail, {e['momentum']!r}, {e['eps']!r}, BLOCK_SIZE=block, "
           f"num_warps={warps})"]
    if e["update"]:
        ll += ["    if rm_k is not rm:", "        rm.copy_(rm_k)", "    if rv_k is not rv:", "        rv.copy_(rv_k)"]
    result = {1: "out", 3: "out, mean, rstd",
              4: "out, mean, rstd, torch.empty(0, device=x.device, dtype=torch.uint8)"}[e["outputs"]]
    ll.append(f"    return {result}")
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


class NormFamily(KernelFamily):
    """Functional batch / instance norm with running statistics as inputs (written back
    in training mode)."""

    kind = "norm"
    # the native ops return (out, save_mean, save_invstd[, an empty uint8 reserve])
    tuple_outputs = True
    knobs = {
        "BLOCK_SIZE": ("1024", "256", "4096"),
        "num_warps": ("4", "1", "8"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        found = batch_norm_op(node) if op is None else None
        return None if found is None else (found, {})

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_batch_norm(plan, group, genome)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        node = group.members[0]
        return [group.ops[node].args[k] for k in _SLOTS], [node]
