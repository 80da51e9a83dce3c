"""Attention written in plain ops, recognised as one chain:

    matmul(softmax(mask(scale(matmul(q, k^T))), -1), v)

(or the mask before the scale). A matmul may be spelled as the dispatcher-level trace
does (``reshape(bmm(reshape(expand(a)), reshape(expand(b))))``). ``scale`` is an optional
``* s`` / ``/ s`` by a number (or a 0-d constant tensor) or a scalar node; ``mask`` an
optional ``masked_fill(m, value)``, ``where(m, scores, value)`` / ``where(m, value,
scores)`` or ``scores + m``. A mask whose value is known at lowering (a buffer or a
constant, whole or sliced from the top-left corner) that drops exactly the keys after the
query is proven causal; any other mask is read by the kernel through its strides
(``AttentionMask``). The decomposition rewrites mask-free chains into one
``scaled_dot_product_attention`` node; masked ones are planned as one attention op over
the original nodes (``overrides.attention_overrides``), so that a chain the kernel does not
take keeps its exact torch semantics (``softmax`` of an all ``-inf`` row is NaN, where
``scaled_dot_product_attention`` returns zeros).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

from .fx_meta import dtype_of, shape_of
from .ops import normalize
from .real_state import real_value

# How the loaded mask value becomes "this key is dropped" (the kernel's predicate):
#   drop: a boolean, True drops (masked_fill(m, v));   keep: a boolean, True keeps
#   (~m, SDPA's boolean attn_mask);   eq0 / ne0: any dtype, dropped where == 0 / != 0
#   (masked_fill(buf == 0, v));   add: a float added to the scaled scores.
MASK_MODES = ("drop", "keep", "eq0", "ne0", "add")

_FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


@dataclass(frozen=True)
class AttentionMask:
    """A mask the kernel applies to the scaled scores: read from ``tensor`` (None when it is
    proven causal) through ``mode``; dropped scores take ``fill`` (``-inf`` excludes the key)."""

    tensor: torch.fx.Node | None
    mode: str
    fill: float = float("-inf")
    causal: bool = False
    # applied to the product before the scale (``masked_fill(q @ k^T, m, v) / s``): the
    # kernel keeps torch's order, so a finite fill or an additive mask is scaled too
    before_scale: bool = False


@dataclass
class AttentionChain:
    q: Any
    k: Any
    v: Any
    scale: tuple[str, Any] | None  # ("mul" | "div", number or scalar node)
    mask: AttentionMask | None
    # nodes the chain replaces and nothing else reads (scores, scale, mask op, softmax, ...)
    inner: list[torch.fx.Node] = field(default_factory=list)


def _single_use(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and len(node.users) == 1


def _op(node: Any, gm: torch.fx.GraphModule | None) -> Any:
    if not isinstance(node, torch.fx.Node) or node.op not in ("call_function", "call_method", "call_module"):
        return None
    if node.op == "call_module" and gm is None:
        return None
    return normalize(node, gm)  # type: ignore[arg-type]


def is_last_two_transpose(node: Any) -> Any:
    """The tensor whose last two dims ``node`` swaps, or None."""
    if not isinstance(node, torch.fx.Node):
        return None
    rank = len(shape_of(node) or ())
    if rank < 2:
        return None
    if node.op == "call_method" and node.target == "transpose" or (
            node.op == "call_function" and node.target is torch.transpose):
        dims = [a for a in node.args[1:3] if isinstance(a, int)]
        if len(dims) == 2 and sorted(d % rank for d in dims) == [rank - 2, rank - 1]:
            return node.args[0]
    if node.op == "call_method" and node.target == "permute" or (
            node.op == "call_function" and node.target is torch.permute):
        # an einsum's operand permute (bhjd -> bhdj) or x.permute(0, 1, 3, 2)
        perm = node.args[1:] if node.op == "call_method" and len(node.args) > 2 else (
            node.args[1] if len(node.args) > 1 else node.kwargs.get("dims"))
        if isinstance(perm, (list, tuple)) and all(isinstance(d, int) for d in perm) and len(perm) == rank and \
                [d % rank for d in perm] == [*range(rank - 2), rank - 1, rank - 2]:
            return node.args[0]
    return None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _constant(v: Any) -> tuple[float | None, list[torch.fx.Node]]:
    """(value, node) of a number, or of a 0-d tensor made from one (``torch.full([], c)``,
    the dispatcher's ``scalar_tensor(c)``: a fill or divisor the trace turned into a tensor),
    read by nothing else; else (None, [])."""
    if _number(v) is not None:
        return _number(v), []
    if not (isinstance(v, torch.fx.Node) and v.op == "call_function" and _single_use(v) and shape_of(v) == ()):
        return None, []
    if v.target is torch.full and len(v.args) == 2 and isinstance(v.args[0], (list, tuple)) and \
            len(v.args[0]) == 0 and _number(v.args[1]) is not None:
        return _number(v.args[1]), [v]
    if v.target is torch.ops.aten.scalar_tensor.default and len(v.args) == 1 and _number(v.args[0]) is not None:
        return _number(v.args[0]), [v]
    return None, []


def _broadcasts(mask: Any, scores: tuple[int, ...]) -> bool:
    """``mask`` reads as a tensor broadcast to ``scores`` (no dim grows the scores)."""
    shape = shape_of(mask)
    if shape is None or len(shape) > len(scores) or len(shape) < 1:
        return False
    return all(a in (1, b) for a, b in zip(shape, scores[len(scores) - len(shape):], strict=True))


def _inverted(node: Any) -> Any:
    """x when node is ``~x`` / ``x.logical_not()`` / ``torch.logical_not(x)`` of a boolean."""
    if not isinstance(node, torch.fx.Node) or not node.args:
        return None
    hit = (node.op == "call_function" and node.target in (operator.invert, torch.logical_not, torch.bitwise_not)) or (
        node.op == "call_method" and node.target in ("logical_not", "bitwise_not"))
    x = node.args[0]
    return x if hit and dtype_of(x) == torch.bool else None


def _drop_source(mask: torch.fx.Node, gm: torch.fx.GraphModule | None
                 ) -> tuple[torch.fx.Node, str, list[torch.fx.Node]]:
    """(tensor read, mode, absorbed nodes) of a boolean "drop" mask: ``x == 0``, ``x != 0``
    and ``~x`` are applied in the kernel to x (when nothing else reads them)."""
    if _single_use(mask):
        x = _inverted(mask)
        if x is not None:
            return x, "keep", [mask]
        op = _op(mask, gm)
        if op is not None and op.op in ("eq", "ne") and isinstance(op.args["input"], torch.fx.Node) \
                and _number(op.args["other"]) == 0.0 and shape_of(op.args["input"]) == shape_of(mask):
            return op.args["input"], "eq0" if op.op == "eq" else "ne0", [mask]
    return mask, "drop", []


def _mask_step(s: torch.fx.Node, gm: torch.fx.GraphModule | None
               ) -> tuple[torch.fx.Node, AttentionMask, list[torch.fx.Node]] | None:
    """(the scores under the mask, the mask, absorbed nodes) when ``s`` masks scores."""
    op = _op(s, gm)
    scores_shape = shape_of(s)
    if op is None or scores_shape is None or op.inplace:
        return None
    if op.op == "masked_fill":
        x, m = op.args["input"], op.args["mask"]
        fill, made = _constant(op.args["value"])
        if fill is None or not isinstance(m, torch.fx.Node) or dtype_of(m) != torch.bool or \
                not _broadcasts(m, scores_shape) or shape_of(x) != scores_shape:
            return None
        src, mode, absorbed = _drop_source(m, gm)
        return x, AttentionMask(src, mode, fill), absorbed + made
    if op.op == "where":
        c, a, b = op.args["condition"], op.args["input"], op.args["other"]
        if not isinstance(c, torch.fx.Node) or dtype_of(c) != torch.bool or not _broadcasts(c, scores_shape):
            return None
        fill_b, made_b = _constant(b)
        if isinstance(a, torch.fx.Node) and shape_of(a) == scores_shape and fill_b is not None:
            return a, AttentionMask(c, "keep", fill_b), made_b
        fill_a, made_a = _constant(a)
        if isinstance(b, torch.fx.Node) and shape_of(b) == scores_shape and fill_a is not None:
            src, mode, absorbed = _drop_source(c, gm)
            return b, AttentionMask(src, mode, fill_a), absorbed + made_a
        return None
    if op.op == "add" and op.args.get("alpha", 1) == 1:
        a, b = op.args["input"], op.args["other"]
        for x, m in ((a, b), (b, a)):
            if isinstance(x, torch.fx.Node) and isinstance(m, torch.fx.Node) and shape_of(x) == scores_shape and \
                    dtype_of(m) in _FLOATS and _broadcasts(m, scores_shape) and x is not m:
                return x, AttentionMask(m, "add"), []
    return None


def _is_reshape(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and (
        (node.op == "call_function" and node.target is torch.reshape)
        or (node.op == "call_method" and node.target in ("reshape", "view")))


def _unbatched(node: Any) -> tuple[Any, list[torch.fx.Node]]:
    """x when ``node`` is ``reshape([expand](x, x.shape), [-1, m, k])`` (a matmul operand
    the dispatcher-level trace folded to 3-D), with the nodes in between; else (None, [])."""
    if not (_is_reshape(node) and _single_use(node)):
        return None, []
    x, chain = node.args[0], [node]
    if isinstance(x, torch.fx.Node) and x.op == "call_method" and x.target == "expand" and _single_use(x):
        chain.append(x)
        x = x.args[0]
    sx, sn = shape_of(x), shape_of(node)
    if sx is None or sn is None or len(sn) != 3 or len(sx) < 3 or tuple(sx[-2:]) != tuple(sn[-2:]) or \
            (chain[-1] is not node and tuple(shape_of(chain[-1]) or ()) != tuple(sx)):
        return None, []
    return x, chain


def _matmul_of(node: Any, gm: torch.fx.GraphModule | None) -> tuple[Any, Any, list[torch.fx.Node]] | None:
    """(a, b, nodes in between) when ``node`` computes ``a @ b``: a matmul, or the
    dispatcher-level trace's ``reshape(bmm(reshape(expand(a)), reshape(expand(b))), out)``
    of operands of three or more dims."""
    if not isinstance(node, torch.fx.Node) or node.op == "call_module":
        return None
    op = _op(node, gm)
    if op is not None and op.op == "matmul":
        return op.args["input"], op.args["other"], []
    if not _is_reshape(node):
        return None
    mm = node.args[0]
    if not isinstance(mm, torch.fx.Node):
        return None
    op = _op(mm, gm) if _single_use(mm) else None
    if op is None or op.op != "matmul" or len(shape_of(mm) or ()) != 3:
        return None
    a, via_a = _unbatched(op.args["input"])
    b, via_b = _unbatched(op.args["other"])
    sa, sb, out = shape_of(a), shape_of(b), shape_of(node)
    if a is None or b is None or sa is None or sb is None or out is None or len(sa) != len(sb) or \
            tuple(out) != (*sa[:-1], sb[-1]) or tuple(sa[:-2]) != tuple(sb[:-2]):
        return None
    return a, b, [mm, *via_a, *via_b]


def match_chain(o: torch.fx.Node, gm: torch.fx.GraphModule | None = None) -> AttentionChain | None:
    """The attention chain ending at ``o`` (the ``@ v`` matmul), or None. Every inner node
    has one user, inside the chain."""
    mm2 = _matmul_of(o, gm)
    if mm2 is None:
        return None
    p, v, inner = mm2
    ident = _op(p, gm) if _single_use(p) else None
    if ident is not None and ident.op == "identity":  # dropout that cannot drop (eval, p == 0)
        inner.append(p)
        p = ident.args["input"]
    sm = _op(p, gm) if _single_use(p) and p.op != "call_module" else None
    if sm is None or sm.op != "softmax" or sm.args["dim"] not in (-1, len(shape_of(p) or ()) - 1):
        return None
    inner.append(p)
    s = sm.args["input"]
    if not _single_use(s):
        return None
    mask: AttentionMask | None = None
    step = _mask_step(s, gm)
    if step is not None:
        inner.append(s)
        s, mask, absorbed = step
        inner += absorbed
        if not _single_use(s):
            return None
    scale: tuple[str, Any] | None = None
    sop = _op(s, gm) if s.op != "call_module" else None
    if sop is not None and sop.op in ("mul", "div"):
        a, b = sop.args["input"], sop.args["other"]

        def scalar(x: Any) -> tuple[Any, list[torch.fx.Node]]:
            """A number (or a 0-d constant) or a scalar node (math.sqrt of a size), else None."""
            value, made = _constant(x)
            if value is None and isinstance(x, torch.fx.Node) and shape_of(x) is None:
                return x, []
            return value, made

        factor, made = scalar(b)
        if sop.op == "mul" and factor is None:
            a, b = b, a
            factor, made = scalar(b)
        if factor is None or not _single_use(a) or (sop.op == "div" and factor == 0.0):
            return None
        scale = ("mul" if sop.op == "mul" else "div", factor)
        inner += [s, *made]
        s = a
        step = _mask_step(s, gm) if mask is None else None
        if step is not None:
            inner.append(s)
            s, mask, absorbed = step
            mask = AttentionMask(mask.tensor, mask.mode, mask.fill, before_scale=True)
            inner += absorbed
            if not _single_use(s):
                return None
    mm1 = _matmul_of(s, gm)
    if mm1 is None:
        return None
    inner.append(s)
    q, kt, via = mm1
    inner += via
    k = is_last_two_transpose(kt)
    if k is None:
        return None
    sq, sk, sv = shape_of(q), shape_of(k), shape_of(v)
    if sq is None or sk is None or sv is None or len(sq) < 3 or not (len(sq) == len(sk) == len(sv)):
        return None
    if not (sq[:-2] == sk[:-2] == sv[:-2] and sq[-1] == sk[-1] and sk[-2] == sv[-2]):
        return None
    if _single_use(kt):
        inner.append(kt)
    if mask is not None and gm is not None:
        mask = prove_causal(mask, gm, (sq[-2], sk[-2]))
    return AttentionChain(q, k, v, scale, mask, inner)


# ---- masks whose value is known at lowering --------------------------------------------


def _attr_value(node: torch.fx.Node, gm: torch.fx.GraphModule) -> torch.Tensor | None:
    obj: Any = gm
    for part in str(node.target).split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, torch.Tensor) or obj.is_meta:
        return None
    if isinstance(obj, FakeTensor):
        # captured on fake tensors: the value of the model built for real, when it is
        # small enough to build (real_state.py); else unknown, and the mask is read
        return real_value(gm, str(node.target), obj)
    return obj


def _top_left(index: Any, rank: int) -> bool:
    """``index`` slices the last two dims of a rank-``rank`` tensor from 0 (any stop, step
    1) and takes every leading dim whole."""
    idx = index if isinstance(index, tuple) else (index,)
    if Ellipsis in idx:
        at = idx.index(Ellipsis)
        idx = idx[:at] + (slice(None),) * (rank - len(idx) + 1) + idx[at + 1:]
    if len(idx) > rank or not all(isinstance(i, slice) for i in idx):
        return False
    idx = idx + (slice(None),) * (rank - len(idx))
    for d, i in enumerate(idx):
        if i.step not in (None, 1) or i.start not in (None, 0):
            return False
        if d < rank - 2 and i.stop is not None:
            return False
    return True


def known_mask(node: torch.fx.Node, gm: torch.fx.GraphModule) -> torch.Tensor | None:
    """The value of a mask read whole from a buffer / constant, or sliced from its top-left
    corner (``self.bias[:, :, :T, :T]``): the whole buffer, whatever ``T`` is at run time."""
    if node.op == "get_attr":
        return _attr_value(node, gm)
    if node.op == "call_function" and node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node) \
            and node.args[0].op == "get_attr":
        value = _attr_value(node.args[0], gm)
        if value is not None and value.dim() >= 2 and _top_left(node.args[1], value.dim()):
            return value
    return None


def _drops(value: torch.Tensor, mode: str) -> torch.Tensor | None:
    if mode == "drop":
        return value.bool()
    if mode == "keep":
        return ~value.bool()
    if mode == "eq0":
        return value == 0
    if mode == "ne0":
        return value != 0
    finite = value[value != float("-inf")]
    return value == float("-inf") if bool((finite == 0).all()) else None  # add: only 0 / -inf entries


def prove_causal(mask: AttentionMask, gm: torch.fx.GraphModule, lengths: tuple[int, int]) -> AttentionMask:
    """``mask`` as causal (top-left aligned, as torch's ``is_causal``) when its known value
    drops exactly the keys after each query over the whole buffer, so every top-left slice
    does too; else unchanged (read from memory by the kernel)."""
    node = mask.tensor
    # before the scale, -inf times a scale of unknown sign need not stay -inf: read the mask
    if node is None or mask.fill != float("-inf") or mask.before_scale or shape_of(node) is None or \
            tuple(shape_of(node)[-2:]) != lengths:  # type: ignore[index]
        return mask  # a broadcast row or column ([1, S]) is no triangle
    # on real values even when asked from inside a fake capture's mode (real_state.py)
    with unset_fake_temporarily():
        value = known_mask(node, gm)
        if value is None or value.dim() < 2:
            return mask
        drops = _drops(value.detach().cpu(), mask.mode)
        if drops is None:
            return mask
        n, m = value.shape[-2], value.shape[-1]
        after = torch.ones(n, m, dtype=torch.bool).triu(1)
        causal = bool((drops == after).all())
    return AttentionMask(None, mask.mode, mask.fill, causal=True) if causal else mask


def scale_value(scale: tuple[str, Any] | None) -> Any:
    """The multiplier of the scores: a number, or ("div", node) / node for a scalar node."""
    if scale is None:
        return 1.0
    kind, v = scale
    if kind == "mul":
        return float(v) if isinstance(v, (int, float)) else v
    if isinstance(v, (int, float)):
        return 1.0 / float(v)
    return ("div", v)
