"""Convolutions the plain conv family (``kernel_conv.py``: conv1d / conv2d, groups = 1,
numeric zero padding, fp32, batched) does not take: conv3d, grouped and depthwise
convolution, ``padding='same'``, reflect / replicate / circular padding modes, unbatched
and fp16 / bf16 inputs, and transposed convolution (1-D / 2-D / 3-D, any stride /
padding / output_padding / dilation / groups), with bias and a fused pointwise epilogue.
Kernel bodies live in ``convnd_bodies.py``.

Every case is addressed as 3-D: a 1-D or 2-D convolution has leading spatial sizes of 1
(stride 1, padding 0), so one generator covers all ranks. Two kernel forms (knob ``form``):

- ``gemm``: an implicit GEMM per group (grid axis 2 = group): rows are output positions
  (N * OD * OH * OW), columns the group's output channels, the reduction runs over
  CIN_G * KD * KH * KW, gathering input taps on the fly.
- ``direct``: one lane per output element walks its CIN_G x window taps (the window
  unrolled, sizes are constexprs). For depthwise convolution (one input channel per
  group) a GEMM tile would be nearly empty, so ``auto`` picks direct there.

Transposed convolution in gather form: output position o reads input position
``(o + pad - k * dil) / stride`` of tap k when that is an integer inside the input, so
nothing is scattered and no atomics are needed. Knob ``transposed``: ``gather`` (default)
or ``zero_insert``: the launcher spreads the input over a zero-filled buffer (stride - 1
zeros between elements) and flips / regroups the weight, and the kernel runs an ordinary
stride-1 convolution with padding ``dil * (k - 1) - pad`` (more memory traffic, no
divisibility tests in the inner loop); or ``phase`` (GEMM form, dilation 1): one implicit
GEMM per output phase ``(o + pad) % stride``, whose reduction walks only that phase's
valid taps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevolve.errors import LoweringError

from ...emit.grid import FOLD_PARAMS, program_id_lines, wide_offsets
from ...emit.launch_helpers import cached_plan_lines, tuple_source
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import (
    epilogue_broadcast_checks,
    epilogue_key_parts,
    epilogue_lines,
    epilogue_materialise_lines,
    epilogue_operands,
    epilogue_plan_lines,
    epilogue_value,
    kernel_name,
    load_cast,
    operand_shape,
)
from ...emit.precision import DOT_PRECISIONS, dot_precision, dot_precisions
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised
from .convnd_bodies import body_direct, body_gemm, body_phase, phase_applies

_CONV_ARGS = ["input", "weight", "bias", "stride", "padding", "dilation", "groups"]
_TCONV_ARGS = ["input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"]
_FUNCS: dict[Any, tuple[int, bool]] = {
    F.conv1d: (1, False), F.conv2d: (2, False), F.conv3d: (3, False),
    F.conv_transpose1d: (1, True), F.conv_transpose2d: (2, True), F.conv_transpose3d: (3, True),
}
_MODULES: dict[type, tuple[int, bool]] = {
    nn.Conv1d: (1, False), nn.Conv2d: (2, False), nn.Conv3d: (3, False),
    nn.ConvTranspose1d: (1, True), nn.ConvTranspose2d: (2, True), nn.ConvTranspose3d: (3, True),
}
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)
FORMS = ("auto", "gemm", "direct")  # knob ``form``
TRANSPOSED_FORMS = ("gather", "zero_insert", "phase")  # knob ``transposed``
# auto: direct when a group has at most this many input channels (depthwise and nearly so)
DIRECT_MAX_CIN_G = 2
# padding_mode: out-of-range taps read zeros, or the input index is folded back inside
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_GEMM_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "precision")


def _tuple(v: Any, nd: int) -> tuple[int, ...] | None:
    if isinstance(v, int):
        return (v,) * nd
    if isinstance(v, (list, tuple)) and len(v) == nd and all(isinstance(i, int) for i in v):
        return tuple(v)
    return None


def _pad3(t: tuple[int, ...], fill: int) -> tuple[int, ...]:
    return (fill,) * (3 - len(t)) + t


def convnd_op(node: torch.fx.Node, gm: torch.fx.GraphModule,
              param_shape: Callable[[str], tuple[int, ...]]) -> NormOp | None:
    """A convolution / transposed convolution node as NormOp('convnd', ...), or None."""
    if node.op == "call_function" and node.target in _FUNCS:
        nd, transposed = _FUNCS[node.target]
        a: dict[str, Any] = dict(zip(_TCONV_ARGS if transposed else _CONV_ARGS, node.args, strict=False))
        a.update(node.kwargs)
        weight = a.get("weight")
        wshape = shape_of(weight)
        mode = "zeros"
    elif node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _MODULES:
        mod: Any = gm.get_submodule(str(node.target))
        nd, transposed = _MODULES[type(mod)]
        if len(node.args) != 1 or node.kwargs:
            return None  # an explicit output_size
        mode = mod.padding_mode
        t = str(node.target)
        a = {"input": node.args[0], "bias": f"@{t}.bias" if mod.bias is not None else None,
             "stride": mod.stride, "padding": mod.padding, "dilation": mod.dilation, "groups": mod.groups,
             "output_padding": getattr(mod, "output_padding", 0)}
        weight = f"@{t}.weight"
        wshape = param_shape(f"{t}.weight")
    else:
        return None
    x = a.get("input")
    xs = shape_of(x)
    groups = a.get("groups", 1)
    if xs is None or wshape is None or len(xs) not in (nd + 1, nd + 2) or len(wshape) != nd + 2 \
            or dtype_of(x) not in _FLOATS:
        return None
    if not isinstance(groups, int) or groups < 1 or mode not in PADDING_MODES:
        return None
    pad: Any = a.get("padding", 0)
    if pad == "valid":
        pad = 0
    same = pad == "same" and not transposed
    if transposed and mode != "zeros":
        return None  # torch accepts only zeros there
    s, d = _tuple(a.get("stride", 1), nd), _tuple(a.get("dilation", 1), nd)
    p = (0,) * nd if same else _tuple(pad, nd)
    op_ = _tuple(a.get("output_padding", 0), nd) if transposed else (0,) * nd
    if s is None or d is None or p is None or op_ is None:
        return None
    cin_g = wshape[0] // groups if transposed else wshape[1]
    bias = a.get("bias")
    what = f"conv_transpose{nd}d" if transposed else f"conv{nd}d"
    return NormOp(what, {"input": x, "weight": weight, "bias": bias},
                  extra={"nd": nd, "transposed": transposed, "same": same, "groups": groups, "mode": mode,
                         # [C, *spatial]: the same memory as a batch of one
                         "unbatched": len(xs) == nd + 1,
                         "s": _pad3(s, 1), "p": _pad3(p, 0), "d": _pad3(d, 1), "op": _pad3(op_, 0),
                         "cin_g": cin_g})


def resolved_form(group: Group, genome: dict[str, str]) -> str:
    form = ConvNdFamily.value(genome, group, "form")
    if form not in FORMS:
        raise LoweringError(f"unknown conv form {form!r}")
    return _auto_form(group.ops[group.members[0]].extra) if form == "auto" else form


def _auto_form(e: dict[str, Any]) -> str:
    return "direct" if e["cin_g"] <= DIRECT_MAX_CIN_G else "gemm"


def gen_convnd(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
    conv = group.members[0]
    op = group.ops[conv]
    e = op.extra
    nd = e["nd"]
    form = resolved_form(group, genome)
    tform = ConvNdFamily.value(genome, group, "transposed")
    if tform not in TRANSPOSED_FORMS:
        raise LoweringError(f"unknown transposed-conv form {tform!r}")
    zero_insert = e["transposed"] and tform == "zero_insert"
    gather = not zero_insert
    phase = e["transposed"] and tform == "phase" and phase_applies(e, form)
    warps = int(ConvNdFamily.value(genome, group, "num_warps"))
    ext, scalars = epilogue_operands(plan, group)
    outs = group_outputs(plan, group)
    has_bias = op.args.get("bias") is not None
    name = kernel_name(group, "conv")
    x_cast = load_cast(dtype_of(op.args["input"]))
    w_dtype = dtype_of(op.args["weight"]) if isinstance(op.args["weight"], torch.fx.Node) else None
    w_cast = load_cast(w_dtype) if w_dtype is not None else ".to(tl.float32)"

    val = epilogue_value(plan, group, ext, scalars)

    full = [operand_shape(plan, v) == group.shape for v in ext]
    bcast = [i for i in range(len(ext)) if not full[i]]
    rank = nd + 1 if e["unbatched"] else nd + 2
    sig = ["x_ptr", "w_ptr"] + (["bias_ptr"] if has_bias else []) + [f"e{i}_ptr" for i in range(len(ext))]
    sig += [f"out{j}_ptr" for j in range(len(outs))]
    sig += (["NB"] if form == "gemm" else ["n_out"]) + ["G", "CIN_G", "D", "H", "W", "COUT_G"]
    sig += ["KD", "KH", "KW"] if form == "gemm" else []
    sig += ["OD", "OH", "OW", "PD", "PH", "PW"]
    sig += [f"e{i}_s{k}" for i in bcast for k in range(rank)]
    sig += [f"s{i}" for i in range(len(scalars))]
    # grid axes (emit/grid.py): gemm and phase forms three (tiles, channel tiles, groups x
    # phases), folded past CUDA's limits; the direct form one
    wide = wide_offsets(group)
    if form == "gemm":
        sig.append(FOLD_PARAMS)
    consts = ("    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr," if form == "gemm" else
              "    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, BLOCK_SIZE: tl.constexpr,")
    what = f"conv_transpose{nd}d" if e["transposed"] else f"conv{nd}d"
    fused = " -> ".join(what if m is conv else group.ops[m].op for m in group.members)
    s, p, d, opad = (e[k][3 - nd:] for k in ("s", "p", "d", "op"))
    x_ = "x".join
    desc = (f"stride {x_(map(str, s))}, padding {'same' if e['same'] else x_(map(str, p))}, "
            f"dilation {x_(map(str, d))}, groups {e['groups']}"
            + (f", output_padding {x_(map(str, opad))}" if e["transposed"] else ""))
    how = ("implicit GEMM per group (rows = output positions, columns = the group's channels)" if form == "gemm"
           else "one lane per output element walking CIN_G x its window")
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", consts, "):",
             f"    # Fuses {fused}: {how};", f"    # {desc}."]
    if e["transposed"]:
        lines.append("    # transposed: phase form, one GEMM per output phase (o + pad) % stride over its own taps"
                     if phase else
                     "    # transposed: gather form, each output reads the inputs that map to it" if gather else
                     "    # transposed: zero_insert form, a stride-1 conv of the zero-spread input and flipped weight")
    if phase:
        precision, note = dot_precision(ConvNdFamily.value(genome, group, "precision"))
        lines += body_phase(e, x_cast, w_cast, precision, note,
                            program_id_lines(["pid_m", "pid_n", "pid_z"], wide=wide, fold=True))
    elif form == "gemm":
        precision, note = dot_precision(ConvNdFamily.value(genome, group, "precision"))
        lines += body_gemm(e, gather, x_cast, w_cast, precision, note,
                           program_id_lines(["pid_m", "pid_n", "g"], wide=wide, fold=True))
    else:
        lines += body_direct(e, gather, x_cast, w_cast, program_id_lines(["pid"], wide=wide))
    head = "acc"
    if has_bias:
        lines.append(f"    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0){w_cast}")
        head = "acc + bias"
    lines.append(f"    v_{conv.name} = {head}")
    # epilogue operands of the output's shape share its offsets; broadcast ones (a per-channel
    # scale, ...) are read through the strides of their expanded view
    idx = ([] if e["unbatched"] else ["n_i"]) + ["cols"] + ["od_i", "oh_i", "ow_i"][3 - nd:]
    lines += epilogue_lines(group, emitter, val, ext, full, idx, "out_off", outs)
    kernel = "\n".join(lines) + "\n"
    launcher = _launcher(name, e, form, zero_insert, phase, has_bias, ext, full, scalars, outs, genome, group, warps)
    return kernel, launcher, f"launch_{name}"


def _launcher(name: str, e: dict[str, Any], form: str, zero_insert: bool, phase: bool, has_bias: bool, ext: list[Any],
              full: list[bool], scalars: list[torch.fx.Node], outs: list[torch.fx.Node],
              genome: dict[str, str], group: Group, warps: int) -> str:
    nd, groups = e["nd"], e["groups"]
    pad_front = f"(1,) * {3 - nd} + " if nd < 3 else ""
    params = ["x", "w"] + (["bias"] if has_bias else []) + [f"e{i}" for i in range(len(ext))]
    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan", "", "",
          f"def _plan_{name}({', '.join(params)}):",
          *(["    nb, cin = 1, x.shape[0]", f"    d, h, w_in = {pad_front}tuple(x.shape[1:])"] if e["unbatched"] else
            ["    nb, cin = x.shape[0], x.shape[1]", f"    d, h, w_in = {pad_front}tuple(x.shape[2:])"]),
          f"    kd, kh, kw = {pad_front}tuple(w.shape[2:])",
          f"    cin_g = cin // {groups}",
          f"    cout_g = {'w.shape[1]' if e['transposed'] else f'w.shape[0] // {groups}'}",
          f"    s, dl = {e['s']}, {e['d']}"]
    if e["same"]:
        # 'same' (stride 1): total padding dil * (k - 1), the odd element on the high side
        ll += ["    plo = tuple(dl[i] * (k - 1) // 2 for i, k in enumerate((kd, kh, kw)))",
               "    phi = tuple(dl[i] * (k - 1) - plo[i] for i, k in enumerate((kd, kh, kw)))"]
    else:
        ll += [f"    plo = phi = {e['p']}"]
    if e["transposed"]:
        ll += [f"    opad = {e['op']}",
               "    osz = tuple((i - 1) * s[j] - 2 * plo[j] + dl[j] * (k - 1) + opad[j] + 1"
               " for j, (i, k) in enumerate(zip((d, h, w_in), (kd, kh, kw))))"]
    else:
        ll += ["    osz = tuple((i + plo[j] + phi[j] - dl[j] * (k - 1) - 1) // s[j] + 1"
               " for j, (i, k) in enumerate(zip((d, h, w_in), (kd, kh, kw))))"]
    if zero_insert:
        # stride-1 conv of the zero-spread input: padding dil * (k - 1) - pad (may be negative)
        ll += ["    xsz = tuple((i - 1) * s[j] + 1 for j, i in enumerate((d, h, w_in)))",
               "    pads = tuple(dl[j] * (k - 1) - plo[j] for j, k in enumerate((kd, kh, kw)))"]
    else:
        ll += ["    xsz = (d, h, w_in)", "    pads = plo"]
    lead = "" if e["unbatched"] else "nb, "
    ll += [f"    shape = ({lead}{groups} * cout_g, *osz[{3 - nd}:])",
           "    if min(osz) < 1 or cin_g * " + str(groups) + " != cin:",
           f"        raise RuntimeError(f'{name}: input {{tuple(x.shape)}} does not fit weight {{tuple(w.shape)}}')"]
    ll += epilogue_broadcast_checks(name, len(ext))
    ll.append("    n = nb * cout_g * " + str(groups) + " * osz[0] * osz[1] * osz[2]")
    if form == "gemm":
        bm, bn = (int(ConvNdFamily.value(genome, group, k)) for k in ("BLOCK_M", "BLOCK_N"))
        if phase:  # rows of the largest phase, one grid slice per (group, phase)
            sd, sh, sw = e["s"]
            per = " * ".join(f"((osz[{j}] + {st - 1}) // {st})" for j, st in enumerate(e["s"]))
            ll += [f"    m = nb * {per}",
                   f"    grid = ((m + {bm - 1}) // {bm}, (cout_g + {bn - 1}) // {bn}, {groups * sd * sh * sw}) "
                   "if n > 0 else None"]
        else:
            ll += ["    m = nb * osz[0] * osz[1] * osz[2]",
                   f"    grid = ((m + {bm - 1}) // {bm}, (cout_g + {bn - 1}) // {bn}, {groups}) if n > 0 else None"]
        ll += [
               f"    tail = (nb, {groups}, cin_g, *xsz, cout_g, kd, kh, kw, *osz, *pads)",
               "    grid, fold = _fold_grid(grid)",
               "    consts = {}"]
    else:
        block = int(ConvNdFamily.value(genome, group, "BLOCK_SIZE"))
        ll += [f"    block = min({block}, _pow2(n)) if n > 0 else 1",
               "    grid, fold = ((n + block - 1) // block,) if n > 0 else None, ()",
               f"    tail = (n, {groups}, cin_g, *xsz, cout_g, *osz, *pads)",
               "    consts = {'KD': kd, 'KH': kh, 'KW': kw, 'BLOCK_SIZE': block}"]
    ll += epilogue_plan_lines(full)
    ll += ["    return shape, materialise, grid, tail, consts, xsz, fold", "", ""]
    key = tuple_source(["x.shape", "w.shape"] + epilogue_key_parts(full))
    ll.append(f"def launch_{name}({', '.join(params + [f's{i}' for i in range(len(scalars))])}):")
    ll += cached_plan_lines(f"_plans_{name}", key, f"_plan_{name}({', '.join(params)})",
                            "shape, materialise, grid, tail, consts, xsz, fold")
    ll += ["    x = x.contiguous()", "    w = w.contiguous()"]
    if zero_insert:
        sl = ", ".join(f"::{st}" for st in e["s"][3 - nd:])
        k_dims = tuple(range(2, nd + 2))
        ll += ["    # zero_insert: the input spread over zeros (stride - 1 between elements) ...",
               f"    xz = x.new_zeros((*x.shape[:{1 if e['unbatched'] else 2}], *xsz[{3 - nd}:]))",
               f"    xz[{':, ' * (1 if e['unbatched'] else 2)}{sl}] = x",
               "    x = xz",
               "    # ... and the weight [CIN, COUT_G, k...] regrouped to [COUT, CIN_G, k...], flipped",
               f"    cin_g = w.shape[0] // {groups}",
               f"    w = w.reshape({groups}, cin_g, w.shape[1], *w.shape[2:]).transpose(1, 2)"
               f".reshape({groups} * w.shape[1], cin_g, *w.shape[2:]).flip({k_dims}).contiguous()"]
    ll += epilogue_materialise_lines(full)
    call = list(params)
    for j, m in enumerate(outs):
        ll.append(f"    out{j} = torch.empty(shape, device=x.device, dtype={dtype_of(m) or torch.float32})")
        call.append(f"out{j}")
    call += ["*tail"] + [f"s{i}" for i in range(len(scalars))] + (["*fold"] if form == "gemm" else [])
    if form == "gemm":
        bm, bn, bk, stages = (int(ConvNdFamily.value(genome, group, k)) for k in
                              ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages"))
        extra = f"BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, num_warps={warps}, num_stages={stages}"
    else:
        extra = f"**consts, num_warps={warps}"
    ll += ["    if grid is not None:",
           f"        {name}[grid]({', '.join(call)},",
           f"            {extra})",
           f"    return {', '.join(f'out{j}' for j in range(len(outs)))}"]
    return "\n".join(ll) + "\n"


def convnd_launch_args(plan: Plan, group: Group) -> LaunchArgs:
    a = group.ops[group.members[0]].args
    ext, scalars = epilogue_operands(plan, group)
    head = [a["input"], a["weight"]] + ([a["bias"]] if a.get("bias") is not None else [])
    return head + ext + scalars, group_outputs(plan, group)


class ConvNdFamily(KernelFamily):
    """conv3d, grouped / depthwise, 'same'-padded, half-precision and transposed
    convolution (1-3 spatial dims) with a fused pointwise epilogue."""

    kind = "convnd"
    epilogue = True
    knobs = {
        # auto: direct for depthwise-like groups (CIN_G <= 2), implicit GEMM otherwise
        "form": FORMS,
        # transposed convolution only: gather (default) or zero-insertion + a stride-1 conv
        "transposed": TRANSPOSED_FORMS,
        "BLOCK_M": ("64", "32", "128"),
        "BLOCK_N": ("32", "16", "64"),
        "BLOCK_K": ("32", "16", "64"),
        "BLOCK_SIZE": ("256", "128", "512", "1024"),
        "num_warps": ("4", "2", "8"),
        "num_stages": ("2", "3"),
        "precision": DOT_PRECISIONS,
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        conv = convnd_op(node, ctx.gm, ctx.param_shape) if op is None else None
        if conv is None:
            return None
        # tiles are loaded as fp32 whatever the input dtype, so the fp32 choices apply
        return conv, {"allowed": {"precision": dot_precisions(ctx.spec, torch.float32)}}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        e = group.ops[group.members[0]].extra
        form = resolved_form(group, genome)
        out = []
        for name, choices in super().group_knobs(plan, group, genome):
            if name == "transposed" and not e["transposed"]:
                continue
            if name == "transposed" and not phase_applies(e, form):
                choices = tuple(c for c in choices if c != "phase")
            if (name in _GEMM_KNOBS and form != "gemm") or (name == "BLOCK_SIZE" and form != "direct"):
                continue  # cannot change the code of the other form
            if name == "form":  # the explicit twin of what auto resolves to gives the same code
                choices = tuple(c for c in choices if c != _auto_form(e) or c == genome.get(f"{group.key}.form"))
            out.append((name, choices))
        return out

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_convnd(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return convnd_launch_args(plan, group)
