"""Convolution (1-D / 2-D, groups=1) as an implicit GEMM: output pixels are the rows
(M = N * OH * OW), output channels the columns, and the reduction runs over
Cin * KH * KW, gathering input patches on the fly (no im2col buffer). The bias and
following pointwise ops of the output's shape run as an epilogue on the accumulator.

Genome knob ``layout`` (conv2d): ``contiguous`` reads NCHW input and OIHW weight and
reduces over (cin, kh, kw); ``channels_last`` has the launcher convert both to
``torch.channels_last`` (NHWC / OHWI; free when they already are) and reduces over
(kh, kw, cin) with cin innermost, so a row of the input tile and a column of the weight
tile are contiguous channel runs. The launcher guarantees the dense layout, so the kernel
addresses it from the sizes (no stride arguments). The output is written NCHW either way,
as the reference returns it for a contiguous input. The weight is converted on every call
(a small copy): a converted copy kept across calls could go stale (``param.data`` updates
do not bump the version counter) and is not protected the way parameters are.
``channels_last_model`` reads like ``channels_last`` and also writes the output NHWC where
every reader takes it (``emit/channels_last.py``), so a chain of convolutions converts its
activations once at its start and once at its end rather than once per convolution.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from kernelevolve.errors import LoweringError

from ...emit.channels_last import MODEL_LAYOUT, channels_last_groups, conv_chain_links
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
    operand_shape,
)
from ...emit.precision import CUDNN, DOT_PRECISIONS, dot_precision, dot_precisions, dot_seed
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

_FUNCS = {F.conv1d: 1, F.conv2d: 2}
_MODULES = {nn.Conv1d: 1, nn.Conv2d: 2}
# genome knob ``layout`` (conv2d), default first; channels_last_model also keeps the output
# channels-last where every reader takes it (``emit/channels_last.py``)
LAYOUTS = ("contiguous", "channels_last", MODEL_LAYOUT)
def _tuple(v: Any, nd: int) -> tuple[int, ...] | None:
    if isinstance(v, int):
        return (v,) * nd
    if isinstance(v, (list, tuple)) and len(v) == nd and all(isinstance(i, int) for i in v):
        return tuple(v)
    return None


def conv_op(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    if node.op == "call_function" and node.target in _FUNCS:
        nd = _FUNCS[node.target]  # type: ignore[index]
        names = ["input", "weight", "bias", "stride", "padding", "dilation", "groups"]
        a: dict[str, Any] = dict(zip(names, node.args, strict=False))
        a.update(node.kwargs)
    elif node.op == "call_module" and type(gm.get_submodule(str(node.target))) in _MODULES:
        mod: Any = gm.get_submodule(str(node.target))
        nd = _MODULES[type(mod)]
        if mod.padding_mode != "zeros" or len(node.args) != 1:
            return None
        t = str(node.target)
        a = {"input": node.args[0], "weight": f"@{t}.weight", "bias": f"@{t}.bias" if mod.bias is not None else None,
             "stride": mod.stride, "padding": mod.padding, "dilation": mod.dilation, "groups": mod.groups}
    else:
        return None
    x = a.get("input")
    xs = shape_of(x)
    if xs is None or len(xs) != nd + 2 or dtype_of(x) != torch.float32 or a.get("groups", 1) != 1:
        return None
    pad = a.get("padding", 0)
    if pad == "valid":
        pad = 0
    s, p, d = _tuple(a.get("stride", 1), nd), _tuple(pad, nd), _tuple(a.get("dilation", 1), nd)
    if s is None or p is None or d is None:
        return None
    if nd == 1:
        s, p, d = (1,) + s, (0,) + p, (1,) + d
    return NormOp("conv", {"input": x, "weight": a["weight"], "bias": a.get("bias")},
                  extra={"nd": nd, "s": s, "p": p, "d": d})


def gen_conv(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    conv = group.members[0]
    op = group.ops[conv]
    e = op.extra
    (sh, sw), (ph, pw), (dh, dw) = e["s"], e["p"], e["d"]
    bm, bn, bk, warps, stages = (int(ConvFamily.value(genome, group, k)) for k in
                                 ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"))
    precision, note = dot_precision(ConvFamily.value(genome, group, "precision"))
    layout = ConvFamily.value(genome, group, "layout")
    if layout not in LAYOUTS:
        raise LoweringError(f"unknown conv layout {layout!r}")
    nhwc = layout != "contiguous" and e["nd"] == 2
    # channels_last_model inside a chain: the output (and the epilogue operands read at its
    # offsets) NHWC too, so the next conv of the chain reads it without a conversion
    keep = nhwc and group.gid in channels_last_groups(plan, genome)
    ext, scalars = epilogue_operands(plan, group)
    outs = group_outputs(plan, group)
    has_bias = op.args.get("bias") is not None
    name = kernel_name(group, "conv")

    val = epilogue_value(plan, group, ext, scalars)

    sig = ["x_ptr", "w_ptr"] + (["bias_ptr"] if has_bias else []) + [f"e{i}_ptr" for i in range(len(ext))]
    sig += [f"out{j}_ptr" for j in range(len(outs))]
    full = [operand_shape(plan, v) == group.shape for v in ext]
    bcast = [i for i in range(len(ext)) if not full[i]]
    sig += ["NB", "CIN", "H", "W", "COUT", "KH", "KW", "OH", "OW"]
    sig += [f"e{i}_s{k}" for i in bcast for k in range(e["nd"] + 2)]  # broadcast operands: expanded strides
    sig += [f"s{i}" for i in range(len(scalars))]
    sig.append(FOLD_PARAMS)  # grid axes: pixel tiles, output-channel tiles (emit/grid.py)
    fused = " -> ".join("conv" if m is conv else group.ops[m].op for m in group.members)
    order = "(kh, kw, cin)" if nhwc else "(cin, kh, kw)"
    if nhwc:
        # (kh, kw, cin) with cin innermost: NHWC input, and OHWI weight rows flatten as rk
        decompose = ["        kh = rk // (KW * CIN)", "        kw = (rk // CIN) % KW", "        ci = rk % CIN"]
        x_addr = "((n_idx[:, None] * H + ih) * W + iw) * CIN + ci[None, :]"
    else:
        decompose = ["        ci = rk // (KH * KW)", "        kh = (rk // KW) % KH", "        kw = rk % KW"]
        x_addr = "((n_idx[:, None] * CIN + ci[None, :]) * H + ih) * W + iw"
    lines = [
        "@triton.jit", f"def {name}(", f"    {', '.join(sig)},",
        "    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,", "):",
        f"    # Fuses {fused}: implicit GEMM, rows = output pixels, columns = output channels,",
        f"    # reduction over {order} with stride {sh}x{sw}, padding {ph}x{pw}, dilation {dh}x{dw}.",
        *(["    # layout=channels_last: NHWC input and OHWI weight (converted by the launcher), cin",
           "    # innermost so tile loads run along channels; the output is written "
           + ("NHWC (channels_last_model)." if keep else "NCHW.")] if nhwc else []),
        *program_id_lines(["pid_m", "pid_n"], wide=wide_offsets(group), fold=True),
        "    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
        "    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)",
        "    M = NB * OH * OW",
        "    K = CIN * KH * KW",
        "    n_idx = rm // (OH * OW)",
        "    oh = (rm // OW) % OH",
        "    ow = rm % OW",
        "    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)",
        "    for k0 in range(0, K, BLOCK_K):",
        "        rk = k0 + tl.arange(0, BLOCK_K)",
        *decompose,
        f"        ih = oh[:, None] * {sh} - {ph} + kh[None, :] * {dh}",
        f"        iw = ow[:, None] * {sw} - {pw} + kw[None, :] * {dw}",
        "        a_mask = (rm[:, None] < M) & (rk[None, :] < K) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)",
        f"        a = tl.load(x_ptr + {x_addr}, mask=a_mask, other=0.0)",
        "        b = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rk[:, None] < K) & (rn[None, :] < COUT),",
        "                    other=0.0)",
        *("        " + line for line in note),
        f'        acc += tl.dot(a, b, input_precision="{precision}")',
        "    rows = rm[:, None]",
        "    cols = rn[None, :]",
        "    mask = (rows < M) & (cols < COUT)",
        *(["    # NHWC offset of (pixel, channel): rm is the pixel index (n, oh, ow)",
           "    out_off = rm[:, None] * COUT + cols"] if keep else
          ["    # NCHW offset of (pixel, channel)",
           "    out_off = (n_idx[:, None] * COUT + cols) * (OH * OW) + (oh[:, None] * OW + ow[:, None])"]),
    ]
    head = "acc"
    if has_bias:
        lines.append("    bias = tl.load(bias_ptr + cols, mask=cols < COUT, other=0.0)")
        head = "acc + bias"
    lines.append(f"    v_{conv.name} = {head}")
    # epilogue operands of the output's shape share its offsets; broadcast ones (a per-channel
    # scale, ...) are read through the strides of their expanded view
    idx = ["n_idx[:, None]", "cols"] + (["ow[:, None]"] if e["nd"] == 1 else ["oh[:, None]", "ow[:, None]"])
    lines += epilogue_lines(group, emitter, val, ext, full, idx, "out_off", outs)
    kernel = "\n".join(lines) + "\n"

    params = ["x", "w"] + (["bias"] if has_bias else []) + [f"e{i}" for i in range(len(ext))]
    ll = [f"_plans_{name} = {{}}  # input signature -> launch plan", "", "",
          f"def _plan_{name}({', '.join(params)}):"]
    if e["nd"] == 1:
        ll += ["    nb, cin, w_in = x.shape", "    h = 1", "    cout, _, kw = w.shape", "    kh = 1"]
    else:
        ll += ["    nb, cin, h, w_in = x.shape", "    cout, _, kh, kw = w.shape"]
    ll += [f"    oh = (h + 2 * {ph} - {dh} * (kh - 1) - 1) // {sh} + 1",
           f"    ow = (w_in + 2 * {pw} - {dw} * (kw - 1) - 1) // {sw} + 1",
           f"    shape = (nb, cout, {'ow' if e['nd'] == 1 else 'oh, ow'})"]
    ll += epilogue_broadcast_checks(name, len(ext))
    ll += [f"    grid = ((nb * oh * ow + {bm - 1}) // {bm}, (cout + {bn - 1}) // {bn}) if nb * cout * oh * ow > 0 "
           "else None",
           "    grid, fold = _fold_grid(grid)",
           "    tail = (nb, cin, h, w_in, cout, kh, kw, oh, ow)"]
    ll += epilogue_plan_lines(full)
    ll += ["    return shape, materialise, grid, tail, fold", "", ""]
    key = tuple_source(["x.shape", "w.shape"] + epilogue_key_parts(full))
    ll.append(f"def launch_{name}({', '.join(params + [f's{i}' for i in range(len(scalars))])}):")
    ll += cached_plan_lines(f"_plans_{name}", key, f"_plan_{name}({', '.join(params)})",
                            "shape, materialise, grid, tail, fold")
    if nhwc:
        ll += ["    # layout=channels_last: NHWC input, OHWI weight (no copy when they already are)",
               "    x = x.contiguous(memory_format=torch.channels_last)",
               "    w = w.contiguous(memory_format=torch.channels_last)"]
    else:
        ll += ["    x = x.contiguous()", "    w = w.contiguous()"]
    ll += epilogue_materialise_lines(full, channels_last=keep)
    call = list(params)
    fmt = ", memory_format=torch.channels_last" if keep else ""
    for j, m in enumerate(outs):
        ll.append(f"    out{j} = torch.empty(shape, device=x.device, dtype={dtype_of(m) or torch.float32}{fmt})")
        call.append(f"out{j}")
    call += ["*tail"] + [f"s{i}" for i in range(len(scalars))] + ["*fold"]
    ll += ["    if grid is not None:",
           f"        {name}[grid]({', '.join(call)},",
           f"            BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_K={bk}, num_warps={warps}, num_stages={stages})",
           f"    return {', '.join(f'out{j}' for j in range(len(outs)))}"]
    return kernel, "\n".join(ll) + "\n", f"launch_{name}"


def conv_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    a = group.ops[group.members[0]].args
    ext, scalars = epilogue_operands(plan, group)
    head = [a["input"], a["weight"]] + ([a["bias"]] if a.get("bias") is not None else [])
    return head + ext + scalars, group_outputs(plan, group)


class ConvFamily(KernelFamily):
    """conv1d / conv2d as an implicit GEMM with a fused pointwise epilogue."""

    kind = "conv"
    epilogue = True
    knobs = {
        "BLOCK_M": ("64", "32", "128"),
        "BLOCK_N": ("32", "16", "64"),
        "BLOCK_K": ("32", "16", "64"),
        "num_warps": ("4", "2", "8"),
        "num_stages": ("2", "3"),
        "precision": DOT_PRECISIONS,
        # channels_last: the launcher converts input / weight to NHWC / OHWI and the kernel
        # reduces over (kh, kw, cin) with cin innermost; the output stays NCHW (conv2d only).
        # channels_last_model: the same, and the output stays NHWC inside a chain of convs
        # (``emit/channels_last.py``), 2-D pools in it too; offered only on plans with a chain
        "layout": LAYOUTS,
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        conv = conv_op(node, ctx.gm) if op is None else None
        if conv is None:
            return None
        # eager runs it on cuDNN: TF32 under the default contract, the seed's precision too
        dt = dtype_of(node)
        return conv, {"allowed": {"precision": dot_precisions(ctx.spec, dt, ctx.precision, CUDNN)},
                      "seed": dot_seed(dt, ctx.precision, CUDNN)}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        nd = group.ops[group.members[0]].extra.get("nd")
        # channels_last is a 4-D memory format
        out = [(name, choices) for name, choices in super().group_knobs(plan, group, genome)
               if not (name == "layout" and nd != 2)]
        if not conv_chain_links(plan):
            out = [(n, tuple(c for c in ch if c != MODEL_LAYOUT) if n == "layout" else ch) for n, ch in out]
        return out

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_conv(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return conv_launch_args(plan, group)
