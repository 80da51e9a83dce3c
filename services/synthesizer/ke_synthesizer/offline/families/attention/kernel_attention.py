"""scaled_dot_product_attention as one flash-style kernel: each program owns BLOCK_M
query rows of one (batch, head), streams key/value blocks and keeps an online softmax
(running max and sum), so the [Lq, Lk] score matrix never reaches memory.

Covered: dropout_p == 0, optional is_causal (top-left aligned, as torch), optional
scale, same leading (batch/head) dims for q, k, v, and an optional mask
(``frontend/attention_chain.py``): SDPA's boolean (True keeps) or additive float
``attn_mask``, and the plain-op chains ``masked_fill`` / ``where`` / ``+ mask`` before the
softmax. A mask of any broadcastable shape ([L, S], [B, 1, 1, S], [B, H, L, S], ...) is
read through its strides, stride 0 on broadcast dims (never expanded in memory); one
whose value is known to be the causal triangle is no read at all (``causal``). Fully
masked rows: SDPA returns zeros (torch's safe softmax), a softmax chain NaN
(``nan_rows``), as torch does. Anything else stays a library call.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from ...emit.grid import FOLD_PARAMS, program_id_lines, wide_offsets
from ...emit.lower_pointwise import PointwiseEmitter
from ...emit.operands import kernel_name
from ...emit.precision import CUBLAS, DOT_PRECISIONS, dot_precision, dot_precisions, dot_seed
from ...frontend.attention_chain import AttentionMask, prove_causal
from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp
from ...plan.plan import Group, Plan, PlanContext
from ...plan.plan_outputs import group_outputs
from ..family import Emitted, KernelFamily, LaunchArgs, Recognised

_NAMES = ["query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"]


def attention_op(node: torch.fx.Node, gm: torch.fx.GraphModule | None = None) -> NormOp | None:
    if node.op != "call_function" or node.target is not F.scaled_dot_product_attention:
        return None
    args = dict(zip(_NAMES, node.args, strict=False))
    args.update(node.kwargs)
    q, k, v = args.get("query"), args.get("key"), args.get("value")
    sq, sk, sv = (shape_of(t) for t in (q, k, v))
    if sq is None or sk is None or sv is None or min(len(sq), len(sk), len(sv)) < 2:
        return None
    if not (len(sq) == len(sk) == len(sv) and sq[:-2] == sk[:-2] == sv[:-2] and sq[-1] == sk[-1]
            and sk[-2] == sv[-2]):
        return None
    if args.get("dropout_p", 0.0) != 0.0 or args.get("enable_gqa", False):
        return None  # dropout draws random numbers: a library call
    if not isinstance(args.get("is_causal", False), bool):
        return None
    scale = args.get("scale")
    if scale is not None and not isinstance(scale, (int, float)) and not (
            isinstance(scale, torch.fx.Node) and shape_of(scale) is None):
        return None  # a tensor scale: library call
    if any(dtype_of(t) not in (torch.float32, torch.float16, torch.bfloat16) for t in (q, k, v)):
        return None
    mask = sdpa_mask(args.get("attn_mask"), (*sq[:-1], sk[-2]))
    if mask is False or (mask is not None and args.get("is_causal", False)):
        return None  # an unsupported mask; torch refuses a mask with is_causal
    operands = {"input": q, "key": k, "value": v}
    if isinstance(mask, AttentionMask):
        if gm is not None:
            mask = prove_causal(mask, gm, (sq[-2], sk[-2]))
        if mask.tensor is not None:
            operands["mask"] = mask.tensor
    causal = bool(args.get("is_causal", False)) or (isinstance(mask, AttentionMask) and mask.causal)
    return NormOp("attention", operands, extra={"causal": causal, "scale": scale, "mask": mask, "nan_rows": False})


def sdpa_mask(m: Any, scores: tuple[int, ...]) -> AttentionMask | None | bool:
    """SDPA's ``attn_mask`` as the kernel reads it: a boolean keeps where True, a float is
    added to the scaled scores; None without a mask, False when it is not one the kernel
    reads (more dims than the scores, a dim that neither matches nor broadcasts)."""
    if m is None:
        return None
    shape = shape_of(m)
    if not isinstance(m, torch.fx.Node) or shape is None or not 1 <= len(shape) <= len(scores):
        return False
    if not all(a in (1, b) for a, b in zip(shape, scores[len(scores) - len(shape):], strict=True)):
        return False
    dt = dtype_of(m)
    if dt == torch.bool:
        return AttentionMask(m, "keep")
    return AttentionMask(m, "add") if dt in (torch.float32, torch.float16, torch.bfloat16) else False


# the kernel's predicate "this key is dropped" from the loaded mask value, per mode
_DROPS = {"drop": "mv != 0", "ne0": "mv != 0", "keep": "mv == 0", "eq0": "mv == 0"}


def _fill_src(v: float) -> str:
    return f'float("{v}")' if math.isinf(v) or math.isnan(v) else repr(float(v))  # inf / nan: no literal


def _mask_lines(mask: AttentionMask | None, key_bounds: str) -> tuple[str, str, str]:
    """(loop lines applying a mask read from memory, row pointer line, note) for the kernel."""
    if mask is None or mask.tensor is None:
        return "", "", ""
    row = ("    # the mask is read through its strides: stride 0 on broadcast dims\n"
           "    m_row = m_ptr + (bid // HEADS) * m_sb + (bid % HEADS) * m_sh + rm[:, None] * m_sm\n")
    load = f"        mv = tl.load(m_row + rn[None, :] * m_sn, mask=(rm[:, None] < LQ) & {key_bounds}, other=0)\n"
    if mask.mode == "add":
        return load + "        s = s + mv.to(tl.float32)\n", row, "additive mask -> "
    return load + f"        s = tl.where({_DROPS[mask.mode]}, {_fill_src(mask.fill)}, s)\n", row, "mask -> "


def gen_attention(plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> tuple[str, str, str]:
    node = group.members[0]
    extra = group.ops[node].extra
    bm, bn, warps, stages = (int(AttentionFamily.value(genome, group, k)) for k in
                             ("BLOCK_M", "BLOCK_N", "num_warps", "num_stages"))
    precision, note = dot_precision(AttentionFamily.value(genome, group, "precision"))
    note_src = "".join(f"    {line}\n" for line in note)
    name = kernel_name(group, "flash")
    causal = extra["causal"]
    mask: AttentionMask | None = extra.get("mask")
    masked = mask is not None and mask.tensor is not None
    mask_apply, mask_row, mask_note = _mask_lines(mask, "(rn[None, :] < LK)")
    product_scale = " * sm_scale"
    if masked and mask is not None and mask.before_scale:  # torch's order: mask the product, then scale
        product_scale, mask_apply = "", mask_apply + "        s = s * sm_scale\n"
    outs = group_outputs(plan, group)
    # grid axes: query blocks, batch x heads (past 65535 at real sizes: folded, emit/grid.py)
    wide = wide_offsets(group)
    ids = "\n".join(program_id_lines(["pid_m", "bid"], wide=wide, fold=True))
    key_range = "tl.arange(0, BLOCK_N)" + (".to(tl.int64)" if wide else "")  # rn * k_sn: int64 with wide
    if mask is not None and not extra.get("nan_rows", False):
        # SDPA: a row with every key masked is zeros (torch's safe softmax), not 0 / 0
        final = "    out = tl.where(l_i[:, None] == 0.0, 0.0, acc / l_i[:, None])\n"
    else:
        final = "    out = acc / l_i[:, None]\n"
    kernel = f'''@triton.jit
def {name}(
    q_ptr, k_ptr, v_ptr, {"m_ptr, " if masked else ""}o_ptr, LQ, LK, D, DV, {"HEADS, " if masked else ""}sm_scale,
    q_sb, q_sm, q_sd, k_sb, k_sn, k_sd, v_sb, v_sn, v_sd, {"m_sb, m_sh, m_sm, m_sn, " if masked else ""}{FOLD_PARAMS},
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
):
    # Fuses q k^T * scale -> {"causal mask -> " if causal else ""}{mask_note}softmax -> @ v with an online softmax:
    # scores live only in registers, one pass over K and V per query block.
{ids}
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rd = tl.arange(0, BLOCK_D)
    rdv = tl.arange(0, BLOCK_DV)
    q = tl.load(q_ptr + bid * q_sb + rm[:, None] * q_sm + rd[None, :] * q_sd,
                mask=(rm[:, None] < LQ) & (rd[None, :] < D), other=0.0).to(tl.float32)
{mask_row}    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], dtype=tl.float32)
    {"hi = tl.minimum(LK, (pid_m + 1) * BLOCK_M)  # causal: later keys are all masked" if causal else "hi = LK"}
{note_src}    for start in range(0, hi, BLOCK_N):
        rn = start + {key_range}
        k = tl.load(k_ptr + bid * k_sb + rn[None, :] * k_sn + rd[:, None] * k_sd,
                    mask=(rn[None, :] < LK) & (rd[:, None] < D), other=0.0).to(tl.float32)
        s = tl.dot(q, k, input_precision="{precision}"){product_scale}
{mask_apply}        valid = (rn[None, :] < LK){" & (rn[None, :] <= rm[:, None])" if causal else ""}
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # rows that have seen no valid key yet keep a finite reference point
        m_ref = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.exp(s - m_ref[:, None])
        alpha = tl.exp(m_i - m_ref)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + bid * v_sb + rn[:, None] * v_sn + rdv[None, :] * v_sd,
                    mask=(rn[:, None] < LK) & (rdv[None, :] < DV), other=0.0).to(tl.float32)
        acc = acc * alpha[:, None] + tl.dot(p, v, input_precision="{precision}")
        m_i = m_new
{final}    tl.store(o_ptr + bid * LQ * DV + rm[:, None] * DV + rdv[None, :], out,
             mask=(rm[:, None] < LQ) & (rdv[None, :] < DV))
'''
    launcher = f"launch_{name}"
    scale = extra["scale"]
    divided = isinstance(scale, tuple)  # ("div", node): the scores are divided by a scalar node
    rt = isinstance(scale, torch.fx.Node) or divided
    if rt:
        scale_src = "1.0 / scale" if divided else "scale"  # computed at run time by the forward
    else:
        scale_src = repr(float(scale)) if scale is not None else "1.0 / math.sqrt(d)"
    dt = dtype_of(outs[0]) or torch.float32
    cache = f"_plans_{name}"
    m_arg = ", m" if masked else ""
    if masked:
        views = f'''def _views_{name}(q, k, v, m):
    # one (batch * heads) grid dimension: leading dims fold; the mask as [outer, heads, L, S],
    # a view whose broadcast dims have stride 0 (reshape copies only a mask whose broadcast
    # outer dims cannot merge)
    lead = q.shape[:-2]
    m = m.expand(*lead, q.shape[-2], k.shape[-2]).reshape(-1, lead[-1] if lead else 1, q.shape[-2], k.shape[-2])
    return q.reshape(-1, q.shape[-2], q.shape[-1]), k.reshape(-1, k.shape[-2], k.shape[-1]), \\
        v.reshape(-1, v.shape[-2], v.shape[-1]), m
'''
    else:
        views = f'''def _views_{name}(q, k, v):
    # one (batch * heads) grid dimension: leading dims fold
    return q.reshape(-1, q.shape[-2], q.shape[-1]), k.reshape(-1, k.shape[-2], k.shape[-1]), \\
        v.reshape(-1, v.shape[-2], v.shape[-1])
'''
    launch = f'''{cache} = {{}}  # input signature -> launch plan


{views}

def _plan_{name}(q, k, v{m_arg}):
    lq, d = q.shape[-2], q.shape[-1]
    lk, dv = k.shape[-2], v.shape[-1]
    views = _views_{name}(q, k, v{m_arg})
    same = all(_same_data(x, t) for x, t in zip(views, (q, k, v{m_arg})))
    bh = views[0].shape[0]
    grid, fold = _fold_grid(((lq + {bm - 1}) // {bm}, bh) if bh * lq * dv > 0 else None)
    sizes = (lq, lk, d, dv{", views[3].shape[1]" if masked else ""}{"" if rt else ", " + scale_src})
    strides = tuple(s for x in views for s in x.stride())
    block_d, block_dv = max(16, _pow2(d)), max(16, _pow2(dv))
    return (*q.shape[:-1], dv), same, grid, sizes, strides, block_d, block_dv, fold


def {launcher}(q, k, v{m_arg}{", scale" if rt else ""}):
    key = (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(){", m.shape, m.stride()" if masked else ""})
    plan = {cache}.get(key)
    if plan is None:
        plan = _remember({cache}, key, _plan_{name}(q, k, v{m_arg}))
    out_shape, same, grid, sizes, strides, block_d, block_dv, fold = plan
    if not same:  # some operand view is a copy: rebuild the views
        q, k, v{m_arg} = _views_{name}(q, k, v{m_arg})
    out = torch.empty(out_shape, device=q.device, dtype={dt})
    if grid is not None:
        {name}[grid](q, k, v{m_arg}, out, *sizes{", " + scale_src if rt else ""}, *strides, *fold,
            BLOCK_M={bm}, BLOCK_N={bn}, BLOCK_D=block_d, BLOCK_DV=block_dv, num_warps={warps}, num_stages={stages})
    return out
'''
    return kernel, launch, launcher


def attention_launch_args(plan: Plan, group: Group) -> tuple[list[Any], list[torch.fx.Node]]:
    op = group.ops[group.members[0]]
    a = op.args
    scale = op.extra["scale"]
    if isinstance(scale, tuple):  # ("div", node): the launcher takes the divisor
        scale = scale[1]
    runtime = [scale] if isinstance(scale, torch.fx.Node) else []
    mask = [a["mask"]] if "mask" in a else []
    return [a["input"], a["key"], a["value"], *mask, *runtime], group_outputs(plan, group)


# num_warps choices a flash-attention group must not take at (BLOCK_M, BLOCK_N, precision):
# Triton 3.6 miscompiles them. Measured on an H200: of 72 configs of attention_plain
# (BLOCK_M 16-128 x BLOCK_N 16-64 x 2/4/8 warps x tf32x3/ieee, each in its own process),
# only 64 x 16 at 8 warps with tf32x3 faults (illegal memory access), in two searches too.
FAULTY_ATTENTION_WARPS: dict[tuple[str, str, str], tuple[str, ...]] = {("64", "16", "tf32x3"): ("8",)}


class AttentionFamily(KernelFamily):
    """scaled_dot_product_attention (and rewritten plain-op attention) as one flash kernel."""

    kind = "attention"
    knobs = {
        "BLOCK_M": ("64", "32", "16", "128"),
        "BLOCK_N": ("64", "32", "16", "128"),
        "num_warps": ("4", "8", "2"),
        "num_stages": ("2", "1", "3"),
        "precision": DOT_PRECISIONS,
    }

    def recognise(self, node: torch.fx.Node, op: NormOp | None, ctx: PlanContext) -> Recognised | None:
        if op is None:
            attention = attention_op(node, ctx.gm)
        else:  # a masked chain in plain ops (frontend/overrides.attention_overrides)
            attention = op if op.op == "attention" else None
        if attention is None:
            return None
        dt = dtype_of(node)
        return attention, {"allowed": {"precision": dot_precisions(ctx.spec, dt, ctx.precision, CUBLAS)},
                           "seed": dot_seed(dt, ctx.precision, CUBLAS)}

    def group_knobs(self, plan: Plan, group: Group, genome: dict[str, str]) -> list[tuple[str, tuple[str, ...]]]:
        out = super().group_knobs(plan, group, genome)
        bm, bn, prec = (genome.get(f"{group.key}.{k}", self.knobs[k][0]) for k in ("BLOCK_M", "BLOCK_N", "precision"))
        faulty = FAULTY_ATTENTION_WARPS.get((bm, bn, prec), ())
        return [(name, tuple(c for c in choices if c not in faulty) if name == "num_warps" else choices)
                for name, choices in out]

    def generate(self, plan: Plan, group: Group, genome: dict[str, str], emitter: PointwiseEmitter) -> Emitted:
        return gen_attention(plan, group, genome, emitter)

    def launch_args(self, plan: Plan, group: Group) -> LaunchArgs:
        return attention_launch_args(plan, group)
