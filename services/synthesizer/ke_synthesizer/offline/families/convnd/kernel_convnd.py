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
  CIN_G * KD * KH * KW, gathering input taps on the fly; knob ``reduction``: ``taps``
  (taps outside, channel blocks of BLOCK_K inside, over the weight packed as
  [G, KD * KH * KW, CIN_G, COUT_G]) or ``flat`` (one K, decoded per element).
- ``direct``: one lane per output element walks its CIN_G x window taps (the window
  unrolled, sizes are constexprs); knob ``direct`` = ``tiled``: a program owns a
  BLOCK_H x BLOCK_W tile of one output plane (``body_direct_tiled``). For depthwise
  convolution (one input channel per group) a GEMM tile would be nearly empty, so
  ``auto`` picks direct there.

Transposed convolution (knob ``transposed``): ``phase`` (the default) is the phase
(sub-pixel) decomposition: the outputs of one phase ``(o + pad) % stride`` all use the
same taps, so each of the stride^nd phases is a dense implicit GEMM over only its taps
(``convnd_bodies.body_phase``; knob ``reduction``: ``taps`` outer with channel blocks
inner, or tap x channel ``flat``), or in the direct form a grid slice whose lanes walk
only their phase's taps (``body_direct_phase``). ``gather``: output
position o reads input position ``(o + pad - k * dil) / stride`` of tap k when that is an
integer inside the input, so nothing is scattered and no atomics are needed, at the cost
of stride^nd times the taps, each masked by a divisibility test. ``zero_insert``: the
launcher spreads the input over a zero-filled buffer (stride - 1 zeros between elements)
and flips / regroups the weight, and the kernel runs an ordinary stride-1 convolution
with padding ``dil * (k - 1) - pad`` (more memory traffic, no divisibility tests).
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
from ...emit.precision import CUDNN, DOT_PRECISIONS, dot_precision, dot_precisions, dot_seed
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised
from .convnd_bodies import (
    body_direct,
    body_direct_phase,
    body_direct_tiled,
    body_gemm,
    body_phase,
    phase_applies,
    resolved_reduction,
    taps_apply,
)

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
TRANSPOSED_FORMS = ("phase", "gather", "zero_insert")  # knob ``transposed``, default first
REDUCTIONS = ("auto", "taps", "flat")  # knob ``reduction`` of the GEMM form
DIRECT_FORMS = ("lanes", "tiled")  # knob ``direct`` of the direct form
LAYOUTS = ("contiguous", "channels_last")  # knob ``layout`` of the taps reduction
# auto: direct when a group has at most this many input channels (depthwise and nearly so)
DIRECT_MAX_CIN_G = 2
# padding_mode: out-of-range taps read zeros, or the input index is folded back inside
PADDING_MODES = ("zeros", "reflect", "replicate", "circular")
_GEMM_KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "precision", "SPLIT_K")


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


def tiled_of(group: Group, genome: dict[str, str], form: str, phase: bool, gather: bool) -> bool:
    """Whether the direct form runs register-tiled (knob ``direct``): not for the
    transposed gather or phase bodies, which keep one lane per output."""
    e = group.ops[group.members[0]].extra
    if form != "direct" or phase or not taps_apply(e, gather):
        return False
    choice = ConvNdFamily.value(genome, group, "direct")
    if choice not in DIRECT_FORMS:
        raise LoweringError(f"unknown direct conv form {choice!r}")
    return choice == "tiled"


def channels_last_of(group: Group, genome: dict[str, str], form: str, reduction: str, phase: bool,
                     gather: bool) -> bool:
    """Whether the taps reduction (GEMM or phase body) reads a channels-last input (knob
    ``layout``)."""
    e = group.ops[group.members[0]].extra
    if form != "gemm" or reduction != "taps" or not (phase or taps_apply(e, gather)):
        return False
    layout = ConvNdFamily.value(genome, group, "layout")
    if layout not in LAYOUTS:
        raise LoweringError(f"unknown conv layout {layout!r}")
    return layout == "channels_last"


def multi_axis(form: str, phase: bool) -> bool:
    """Whether the kernel's grid has more than one axis, so it takes ``FOLD_PARAMS`` and
    its launcher folds the grid past CUDA's limits (``emit/grid.py``): the plain GEMM form
    (row tiles, column tiles, groups x SPLIT_K) and the direct phase form (lanes, phases);
    the phase GEMM form (one 1-D grid of phase, group and tiles) and the direct lane and
    tiled forms have one axis."""
    return (form == "gemm") != phase


def split_k_of(group: Group, genome: dict[str, str], form: str) -> int:
    """SPLIT_K of a GEMM-form convolution alone in its group (bias allowed: split 0 adds
    it); 1 otherwise, as a pointwise epilogue cannot run on partial sums."""
    if form != "gemm" or len(group.members) > 1:
        return 1
    return int(ConvNdFamily.value(genome, group, "SPLIT_K"))


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
    reduction = "flat"
    if form == "gemm":
        reduction = ConvNdFamily.value(genome, group, "reduction")
        if reduction not in REDUCTIONS:
            raise LoweringError(f"unknown conv reduction {reduction!r}")
        reduction = resolved_reduction(e, reduction)
    # the weight packed as [G, KD * KH * KW, CIN_G, COUT_G] (phase form, taps reduction)
    packed = form == "gemm" and (phase or (reduction == "taps" and taps_apply(e, gather)))
    split = split_k_of(group, genome, form) > 1
    cl = channels_last_of(group, genome, form, reduction, phase, gather)
    tiled = tiled_of(group, genome, form, phase, gather)
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
    # program ids (emit/grid.py): int64 where a tensor reaches 2**31 elements; a grid of
    # more than one axis folds past CUDA's limits
    wide = wide_offsets(group)
    folds = multi_axis(form, phase)
    if folds:
        sig.append(FOLD_PARAMS)
    consts = ("    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,"
              + (" SPLIT_K: tl.constexpr," if split else "") if form == "gemm" else
              "    KD: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, "
              + ("BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr," if tiled else "BLOCK_SIZE: tl.constexpr,"))
    what = f"conv_transpose{nd}d" if e["transposed"] else f"conv{nd}d"
    fused = " -> ".join(what if m is conv else group.ops[m].op for m in group.members)
    s, p, d, opad = (e[k][3 - nd:] for k in ("s", "p", "d", "op"))
    x_ = "x".join
    desc = (f"stride {x_(map(str, s))}, padding {'same' if e['same'] else x_(map(str, p))}, "
            f"dilation {x_(map(str, d))}, groups {e['groups']}"
            + (f", output_padding {x_(map(str, opad))}" if e["transposed"] else ""))
    how = ("implicit GEMM per group (rows = output positions, columns = the group's channels)" if form == "gemm"
           else "a BLOCK_H x BLOCK_W tile of one output plane per program walking CIN_G x its window" if tiled
           else f"one lane per output element walking CIN_G x {'its phase' if phase else 'its window'}")
    lines = ["@triton.jit", f"def {name}(", f"    {', '.join(sig)},", consts, "):",
             f"    # Fuses {fused}: {how};", f"    # {desc}."]
    if e["transposed"]:
        lines.append(("    # transposed: phase form, one GEMM per output phase (o + pad) % stride over its own taps"
                      if form == "gemm" else
                      "    # transposed: phase form, grid axis 1 = output phase (o + pad) % stride, only its taps")
                     if phase else
                     "    # transposed: gather form, each output reads the inputs that map to it" if gather else
                     "    # transposed: zero_insert form, a stride-1 conv of the zero-spread input and flipped weight")
    if phase and form == "gemm":
        precision, note = dot_precision(ConvNdFamily.value(genome, group, "precision"))
        lines += body_phase(e, reduction, split, cl, x_cast, w_cast, precision, note,
                            program_id_lines(["pid"], wide=wide))
    elif phase:
        lines += body_direct_phase(e, x_cast, w_cast, program_id_lines(["pid", "ph"], wide=wide, fold=True))
    elif tiled:
        lines += body_direct_tiled(e, gather, x_cast, w_cast, program_id_lines(["pid"], wide=wide))
    elif form == "gemm":
        precision, note = dot_precision(ConvNdFamily.value(genome, group, "precision"))
        lines += body_gemm(e, gather, reduction, split, cl, x_cast, w_cast, precision, note,
                           program_id_lines(["pid_m", "pid_n", "pid_z" if split else "g"], wide=wide, fold=True))
    else:
        lines += body_direct(e, gather, x_cast, w_cast, program_id_lines(["pid"], wide=wide))
    head = "acc"
    if has_bias:
        lines.append(f"    bias = tl.load(bias_ptr + cols, mask=mask, other=0.0){w_cast}")
        head = "acc + tl.where(sid == 0, bias, 0.0)" if split else "acc + bias"  # split-K: one split adds it
    lines.append(f"    v_{conv.name} = {head}")
    if split:
        # split-K: the conv is alone in its group (fp32 output), each slice adds its partial sum
        lines.append(f"    tl.atomic_add(out0_ptr + out_off, v_{conv.name}, mask=mask)")
    # epilogue operands of the output's shape share its offsets; broadcast ones (a per-channel
    # scale, ...) are read through the strides of their expanded view
    idx = ([] if e["unbatched"] else ["n_i"]) + ["cols"] + ["od_i", "oh_i", "ow_i"][3 - nd:]
    if not split:
        lines += epilogue_lines(group, emitter, val, ext, full, idx, "out_off", outs)
    kernel = "\n".join(lines) + "\n"
    launcher = _launcher(name, e, form, zero_insert, phase, packed, tiled, cl, folds, has_bias, ext, full, scalars,
                         outs, genome, group, warps)
    return kernel, launcher, f"launch_{name}"


def _launcher(name: str, e: dict[str, Any], form: str, zero_insert: bool, phase: bool, packed: bool, tiled: bool,
              cl: bool, folds: bool, has_bias: bool, ext: list[Any],
              full: list[bool], scalars: list[torch.fx.Node], outs: list[torch.fx.Node],
              genome: dict[str, str], group: Group, warps: int) -> str:
    nd, groups = e["nd"], e["groups"]
    split_k = split_k_of(group, genome, form)
    pad_front = f"(1,) * {3 - nd} + " if nd < 3 else ""
    params = ["x", "w"] + (["bias"] if has_bias else []) + [f"e{i}" for i in range(len(ext))]
    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan"]
    if packed:
        ll.append(f"_packed_{name} = [None, -1, -1, None]  # weight, its version and storage -> packed weight")
    ll += ["", "",
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
    sd, sh, sw = e["s"]
    # positions of the largest phase
    per = " * ".join(f"((osz[{j}] + {st - 1}) // {st})" for j, st in enumerate(e["s"]))
    if form == "gemm":
        bm, bn = (int(ConvNdFamily.value(genome, group, k)) for k in ("BLOCK_M", "BLOCK_N"))
        if phase:  # one 1-D grid of (phase, group, row and column tiles)
            z = groups * sd * sh * sw * split_k
            ll += [f"    m = nb * {per}",
                   f"    grid, fold = (((m + {bm - 1}) // {bm}) * ((cout_g + {bn - 1}) // {bn}) * {z},) "
                   "if n > 0 else None, ()"]
        else:
            ll += ["    m = nb * osz[0] * osz[1] * osz[2]",
                   f"    grid = ((m + {bm - 1}) // {bm}, (cout_g + {bn - 1}) // {bn}, {groups * split_k}) "
                   "if n > 0 else None"]
        ll += [
               f"    tail = (nb, {groups}, cin_g, *xsz, cout_g, kd, kh, kw, *osz, *pads)",
               # a grid of two or three axes past CUDA's limits: one axis-0 grid (emit/grid.py)
               *(["    grid, fold = _fold_grid(grid)"] if folds else []),
               "    consts = {}"]
    else:
        block = int(ConvNdFamily.value(genome, group, "BLOCK_SIZE"))
        if tiled:  # BLOCK_W along the output row (up to a power of two above OW), BLOCK_H rows
            ll += [f"    bw = min({block}, _pow2(osz[2]))",
                   f"    bh = max(min({block} // bw, _pow2(osz[1])), 1)",
                   f"    planes = nb * {groups} * cout_g * osz[0]",
                   "    grid, fold = (planes * ((osz[1] + bh - 1) // bh) * ((osz[2] + bw - 1) // bw),) "
                   "if n > 0 else None, ()"]
        elif phase:  # grid axis 1: the phase; axis 0: lanes of the largest phase
            ll += [f"    n_ph = nb * cout_g * {groups} * {per}",
                   f"    block = min({block}, _pow2(n_ph)) if n > 0 else 1",
                   f"    grid = ((n_ph + block - 1) // block, {sd * sh * sw}) if n > 0 else None"]
        else:
            ll += [f"    block = min({block}, _pow2(n)) if n > 0 else 1",
                   "    grid, fold = ((n + block - 1) // block,) if n > 0 else None, ()"]
        ll += [
               f"    tail = (n, {groups}, cin_g, *xsz, cout_g, *osz, *pads)",
               *(["    grid, fold = _fold_grid(grid)"] if folds else []),
               ("    consts = {'KD': kd, 'KH': kh, 'KW': kw, 'BLOCK_H': bh, 'BLOCK_W': bw}" if tiled else
                "    consts = {'KD': kd, 'KH': kh, 'KW': kw, 'BLOCK_SIZE': block}")]
    ll += epilogue_plan_lines(full)
    ll += ["    return shape, materialise, grid, tail, consts, xsz, fold", "", ""]
    key = tuple_source(["x.shape", "w.shape"] + epilogue_key_parts(full))
    ll.append(f"def launch_{name}({', '.join(params + [f's{i}' for i in range(len(scalars))])}):")
    ll += cached_plan_lines(f"_plans_{name}", key, f"_plan_{name}({', '.join(params)})",
                            "shape, materialise, grid, tail, consts, xsz, fold")
    # layout=channels_last moves channels innermost below instead (no NCDHW copy first)
    ll += ([] if cl else ["    x = x.contiguous()"]) + ([] if packed else ["    w = w.contiguous()"])
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
    if cl:
        # layout=channels_last: channels innermost ([N, D, H, W, C] order, as 3-D), a view of
        # a channels_last input (no copy), a copy of a contiguous one
        ll += [f"    x = x.movedim({0 if e['unbatched'] else 1}, -1).contiguous()"]
    if packed:
        # -> [G, KD * KH * KW, CIN_G, COUT_G]: a B tile (one tap, a channel block) is then a
        # contiguous run of output channels. Packed once per weight: a copy kernel and four
        # view calls per forward otherwise; an in-place update bumps ``_version`` and a new
        # tensor or storage misses the cache, so a changed weight is never read stale.
        src, perm = ("[CIN, COUT_G, k...]", "0, 3, 1, 2") if phase else ("[COUT, CIN_G, k...]", "0, 3, 2, 1")
        ll += [f"    pk = _packed_{name}",
               "    if pk[0] is not w or pk[1] != w._version or pk[2] != w.data_ptr():",
               f"        # {src} packed",
               "        pk[:] = [w, w._version, w.data_ptr(), w.contiguous()"
               f".reshape({groups}, w.shape[0] // {groups}, w.shape[1], -1).permute({perm}).contiguous()]",
               "    w = pk[3]"]
    ll += epilogue_materialise_lines(full)
    call = list(params)
    for j, m in enumerate(outs):
        alloc = "torch.zeros" if split_k > 1 else "torch.empty"  # split-K accumulates into zeros
        ll.append(f"    out{j} = {alloc}(shape, device=x.device, dtype={dtype_of(m) or torch.float32})")
        call.append(f"out{j}")
    call += ["*tail"] + [f"s{i}" for i in range(len(scalars))] + (["*fold"] if folds else [])
    if form == "gemm":
        bm, bn, bk, stages = (int(ConvNdFamily.value(genome, group, k)) for k in
                              ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages"))
        extra = (f"BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}," + (f" SPLIT_K={split_k}," if split_k > 1 else "")
                 + f" num_warps={warps}, num_stages={stages}")
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
        # transposed convolution only: phase (each output phase over only its own taps: a
        # dense GEMM per phase, or direct lanes of one phase per program), gather, or
        # zero-insertion + a stride-1 conv
        "transposed": TRANSPOSED_FORMS,
        # GEMM form (not the transposed gather): K tiles of one tap's channels (taps) or
        # tap x channel flattened (flat); auto: taps from 16 input channels per group
        "reduction": REDUCTIONS,
        "BLOCK_M": ("64", "32", "128"),
        "BLOCK_N": ("32", "16", "64"),
        "BLOCK_K": ("32", "16", "64"),
        "BLOCK_SIZE": ("256", "128", "512", "1024"),
        # direct form (not the transposed gather / phase bodies): one lane per output
        # (lanes) or a BLOCK_H x BLOCK_W tile of one output plane per program (tiled: a
        # tap's weight is one scalar load, its bounds a row and a column vector)
        "direct": DIRECT_FORMS,
        # taps reduction: the input read as NCDHW (contiguous) or channels-last (the launcher
        # moves channels innermost: free for a channels_last input, a copy otherwise), so a
        # row's channel block is one contiguous run; the output stays NCDHW
        "layout": LAYOUTS,
        "num_warps": ("4", "2", "8"),
        "num_stages": ("2", "3"),
        "precision": DOT_PRECISIONS,
        # GEMM form, a conv alone in its group with an fp32 output: SPLIT_K programs share an
        # output tile, each summing a slice of K (flat) or of the channels (taps) and adding
        # it atomically into a zeroed output: more programs where the output is small and
        # K = CIN_G x taps is long
        "SPLIT_K": ("1", "2", "4"),
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        conv = convnd_op(node, ctx.gm, ctx.param_shape) if op is None else None
        if conv is None:
            return None
        # tiles are loaded as fp32 whatever the input dtype, so the fp32 choices apply
        split = ["1", "2", "4"] if dtype_of(node) == torch.float32 else ["1"]  # atomics on fp32 only
        # eager runs it on cuDNN: TF32 under the default contract for fp32 (fp16 / bf16 cuDNN
        # convolutions run on their own tensor cores: no TF32 seed)
        allowed = {"precision": dot_precisions(ctx.spec, torch.float32, ctx.precision, CUDNN), "SPLIT_K": split}
        return conv, {"allowed": allowed, "seed": dot_seed(dtype_of(node), ctx.precision, CUDNN)}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        e = group.ops[group.members[0]].extra
        form = resolved_form(group, genome)
        out = []
        for name, choices in super().group_knobs(plan, group, genome):
            if name == "transposed" and not e["transposed"]:
                continue
            if name == "transposed" and not phase_applies(e, form):
                choices = tuple(c for c in choices if c != "phase")
            if name == "reduction":
                tform = self.value(genome, group, "transposed")
                if form != "gemm" or (e["transposed"] and tform == "gather"):
                    continue  # the direct form and the transposed gather have one reduction
                # the explicit twin of what auto resolves to gives the same code
                choices = tuple(c for c in choices if c != resolved_reduction(e, "auto")
                                or c == genome.get(f"{group.key}.reduction"))
            if (name in _GEMM_KNOBS and form != "gemm") or (name == "BLOCK_SIZE" and form != "direct"):
                continue  # cannot change the code of the other form
            lanes_only = e["transposed"] and self.value(genome, group, "transposed") != "zero_insert"
            if name == "direct" and (form != "direct" or lanes_only):
                continue  # the transposed phase / gather bodies keep one lane per output
            if name == "layout":
                tform = self.value(genome, group, "transposed")
                taps = resolved_reduction(e, self.value(genome, group, "reduction")) == "taps"
                if form != "gemm" or not taps or (e["transposed"] and tform == "gather"):
                    continue  # channels-last addressing exists for the taps reduction only
            if name == "SPLIT_K" and (len(group.members) > 1 or len(choices) < 2):
                continue  # a pointwise epilogue cannot run on partial sums
            if name == "form":  # the explicit twin of what auto resolves to gives the same code
                choices = tuple(c for c in choices if c != _auto_form(e) or c == genome.get(f"{group.key}.form"))
            out.append((name, choices))
        return out

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_convnd(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return convnd_launch_args(plan, group)
