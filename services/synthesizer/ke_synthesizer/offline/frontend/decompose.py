"""Graph rewrites run after capture: library modules and functions that are
compositions of ops the lowering knows are replaced by those ops, so that they fuse
like hand-written code (batch/group/instance norm, simple losses, normalize, ...).

Every rewrite reproduces the forward of the reference in its mode: BatchNorm in training
mode uses batch statistics (its running-stat update, a side effect that does not change
the output, is not reproduced; instance norm likewise), in eval mode its running
statistics (a per-channel scale and shift that fuses into the convolution's epilogue). Ops with randomness (dropout with
p > 0 in training mode) are never rewritten: they stay library calls.
"""

from __future__ import annotations

import functools
import logging
import math
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from .attention_chain import match_chain, scale_value
from .captured import CapturedSpec
from .functional_misc import MISC_REWRITES
from .fx_meta import propagate_shapes, shape_of
from .matmul_shapes import MATMUL_REWRITES
from .multi_output import split_multi_outputs
from .norm_functional import NORM_REWRITES, replace_parts
from .ops import normalize

log = logging.getLogger(__name__)

Builder = Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None]


def _call(g: torch.fx.Graph, fn: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
    return g.call_function(fn, tuple(args), kwargs)


def _method(g: torch.fx.Graph, name: str, *args: Any) -> torch.fx.Node:
    return g.call_method(name, tuple(args))


def _normalize_stats(g: torch.fx.Graph, x: Any, dims: list[int], eps: float) -> torch.fx.Node:
    """(x - mean) * rsqrt(var + eps) with biased variance over ``dims`` (keepdim)."""
    mu = _call(g, torch.mean, x, dims, keepdim=True)
    d = _call(g, torch.sub, x, mu)
    var = _call(g, torch.mean, _call(g, torch.mul, d, d), dims, keepdim=True)
    return _call(g, torch.mul, d, _call(g, torch.rsqrt, _call(g, torch.add, var, eps)))


def _affine(g: torch.fx.Graph, y: torch.fx.Node, mod_path: str, mod: nn.Module, rank: int) -> torch.fx.Node:
    """y * weight + bias with per-channel parameters broadcast over dim 1."""
    view = [-1] + [1] * (rank - 2)
    if getattr(mod, "weight", None) is not None:
        w = _method(g, "view", g.get_attr(f"{mod_path}.weight"), *view)
        y = _call(g, torch.mul, y, w)
    if getattr(mod, "bias", None) is not None:
        b = _method(g, "view", g.get_attr(f"{mod_path}.bias"), *view)
        y = _call(g, torch.add, y, b)
    return y


def _batch_norm(g: torch.fx.Graph, node: torch.fx.Node, mod: nn.Module) -> torch.fx.Node | None:
    shape = shape_of(node.args[0])
    if shape is None or len(shape) < 2:
        return None
    x = node.args[0]
    if not (mod.training or not mod.track_running_stats):
        return _batch_norm_running(g, node, mod, len(shape))
    dims = [0] + list(range(2, len(shape)))
    y = _normalize_stats(g, x, dims, float(mod.eps))  # type: ignore[arg-type]
    return _affine(g, y, str(node.target), mod, len(shape))


def _batch_norm_running(g: torch.fx.Graph, node: torch.fx.Node, mod: nn.Module, rank: int) -> torch.fx.Node:
    """Eval mode with running statistics: ``(x - running_mean) * rsqrt(running_var + eps)``
    then the affine, per channel. Pointwise ops on buffers, so they fold into the preceding
    convolution's fused epilogue (its Triton kernel, or the Triton kernel after its library
    call) and cost no pass of their own. Folded into the epilogue, not into the conv's
    weights: a library conv whose batch norm vanished into cuDNN's weights could leave the
    candidate without Triton arithmetic of its own, and the buffers may change between
    calls (folded weights would have to be recomputed or guarded)."""
    view = [-1] + [1] * (rank - 2)
    path = str(node.target)
    mean = _method(g, "view", g.get_attr(f"{path}.running_mean"), *view)
    var = _method(g, "view", g.get_attr(f"{path}.running_var"), *view)
    inv = _call(g, torch.rsqrt, _call(g, torch.add, var, float(mod.eps)))  # type: ignore[arg-type]
    y = _call(g, torch.mul, _call(g, torch.sub, node.args[0], mean), inv)
    return _affine(g, y, path, mod, rank)


def _instance_norm(g: torch.fx.Graph, node: torch.fx.Node, mod: nn.Module) -> torch.fx.Node | None:
    shape = shape_of(node.args[0])
    if shape is None or len(shape) < 3 or (mod.track_running_stats and not mod.training):
        return None
    y = _normalize_stats(g, node.args[0], list(range(2, len(shape))), float(mod.eps))  # type: ignore[arg-type]
    return _affine(g, y, str(node.target), mod, len(shape)) if mod.affine else y


def _group_norm(g: torch.fx.Graph, node: torch.fx.Node, mod: nn.GroupNorm) -> torch.fx.Node | None:
    x = node.args[0]
    shape = shape_of(x)
    if shape is None or len(shape) < 2:
        return None
    n = _method(g, "size", x, 0)
    grouped = _method(g, "reshape", x, n, mod.num_groups, -1)
    y = _normalize_stats(g, grouped, [-1], float(mod.eps))
    y = _method(g, "reshape", y, _call(g, getattr, x, "shape"))
    return _affine(g, y, str(node.target), mod, len(shape)) if mod.affine else y


def _loss_reduce(g: torch.fx.Graph, v: torch.fx.Node, reduction: str) -> torch.fx.Node | None:
    if reduction == "mean":
        return _call(g, torch.mean, v)
    if reduction == "sum":
        return _call(g, torch.sum, v)
    if reduction == "none":
        return v
    return None


def _fn_args(node: torch.fx.Node, names: list[tuple[str, Any]]) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for (name, _default), value in zip(names, node.args, strict=False):
        out[name] = value
    for k, v in node.kwargs.items():
        if k not in [n for n, _ in names]:
            return None
        out[k] = v
    for name, default in names:
        out.setdefault(name, default)
    if any(v is _REQ for v in out.values()):
        return None
    return out


_REQ = object()


def _mse(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("size_average", None), ("reduce", None),
                        ("reduction", "mean"), ("weight", None)])
    if a is None or a["size_average"] is not None or a["reduce"] is not None or a["weight"] is not None:
        return None
    if shape_of(a["input"]) != shape_of(a["target"]):
        return None
    d = _call(g, torch.sub, a["input"], a["target"])
    return _loss_reduce(g, _call(g, torch.mul, d, d), a["reduction"])


def _l1(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("size_average", None), ("reduce", None),
                        ("reduction", "mean")])
    if a is None or a["size_average"] is not None or a["reduce"] is not None:
        return None
    if shape_of(a["input"]) != shape_of(a["target"]):
        return None
    return _loss_reduce(g, _call(g, torch.abs, _call(g, torch.sub, a["input"], a["target"])), a["reduction"])


def _huber(g: torch.fx.Graph, node: torch.fx.Node, smooth_l1: bool) -> torch.fx.Node | None:
    key = "beta" if smooth_l1 else "delta"
    names = [("input", _REQ), ("target", _REQ)]
    names += [("size_average", None), ("reduce", None), ("reduction", "mean"), ("beta", 1.0)] if smooth_l1 else \
        [("reduction", "mean"), ("delta", 1.0), ("weight", None)]
    a = _fn_args(node, names)
    if a is None or a.get("size_average") is not None or a.get("reduce") is not None or a.get("weight") is not None:
        return None
    if shape_of(a["input"]) != shape_of(a["target"]) or not isinstance(a[key], (int, float)) or a[key] <= 0:
        return None
    t = float(a[key])
    ad = _call(g, torch.abs, _call(g, torch.sub, a["input"], a["target"]))
    quad = _call(g, torch.mul, _call(g, torch.mul, ad, ad), 0.5 / t if smooth_l1 else 0.5)
    lin = _call(g, torch.sub, ad, 0.5 * t) if smooth_l1 else _call(g, torch.mul, _call(g, torch.sub, ad, 0.5 * t), t)
    v = _call(g, torch.where, _call(g, torch.lt, ad, t), quad, lin)
    return _loss_reduce(g, v, a["reduction"])


def _kl_div(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("size_average", None), ("reduce", None),
                        ("reduction", "mean"), ("log_target", False)])
    if a is None or a["size_average"] is not None or a["reduce"] is not None:
        return None
    inp, tgt = a["input"], a["target"]
    if shape_of(inp) is None or shape_of(inp) != shape_of(tgt):
        return None
    if a["log_target"]:
        v = _call(g, torch.mul, _call(g, torch.exp, tgt), _call(g, torch.sub, tgt, inp))
    else:
        # xlogy(t, t) - t * input, with 0 * log(0) = 0
        tlogt = _call(g, torch.where, _call(g, torch.gt, tgt, 0.0),
                      _call(g, torch.mul, tgt, _call(g, torch.log, tgt)), 0.0)
        v = _call(g, torch.sub, tlogt, _call(g, torch.mul, tgt, inp))
    if a["reduction"] == "batchmean":
        total = _call(g, torch.sum, v)
        return _call(g, torch.div, total, _method(g, "size", inp, 0))
    return _loss_reduce(g, v, a["reduction"])


def _normalize(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("p", 2.0), ("dim", 1), ("eps", 1e-12), ("out", None)])
    if a is None or a["out"] is not None or not isinstance(a["dim"], int) or a["p"] not in (1, 2, 1.0, 2.0):
        return None
    n = _call(g, torch.norm, a["input"], p=float(a["p"]), dim=a["dim"], keepdim=True)
    return _call(g, torch.div, a["input"], _call(g, torch.clamp_min, n, float(a["eps"])))


def _cosine(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("x1", _REQ), ("x2", _REQ), ("dim", 1), ("eps", 1e-8)])
    if a is None or not isinstance(a["dim"], int) or shape_of(a["x1"]) != shape_of(a["x2"]):
        return None
    x1, x2, dim, eps = a["x1"], a["x2"], a["dim"], float(a["eps"])
    # torch: sum(x1 * x2) / sqrt(clamp_min(|x1|^2 * |x2|^2, eps^2))
    dot = _call(g, torch.sum, _call(g, torch.mul, x1, x2), dim)
    n1 = _call(g, torch.sum, _call(g, torch.mul, x1, x1), dim)
    n2 = _call(g, torch.sum, _call(g, torch.mul, x2, x2), dim)
    den = _call(g, torch.sqrt, _call(g, torch.clamp_min, _call(g, torch.mul, n1, n2), eps * eps))
    return _call(g, torch.div, dot, den)


def _cross_entropy(g: torch.fx.Graph, node: torch.fx.Node, log_probs: bool = False) -> torch.fx.Node | None:
    """``F.cross_entropy``, or with ``log_probs`` ``F.nll_loss`` (the input already holds
    log-probabilities: no logsumexp)."""
    names = [("input", _REQ), ("target", _REQ), ("weight", None), ("size_average", None), ("ignore_index", -100),
             ("reduce", None), ("reduction", "mean")] + ([] if log_probs else [("label_smoothing", 0.0)])
    a = _fn_args(node, names)
    if a is None or a["size_average"] is not None or a["reduce"] is not None:
        return None
    x, t, w = a["input"], a["target"], a["weight"]
    smoothing = a.get("label_smoothing", 0.0)
    if len(shape_of(x) or ()) != 2 or len(shape_of(t) or ()) != 1 or not isinstance(smoothing, (int, float)):
        return None
    # a module's weight buffer is a fresh get_attr node (no shape yet): the reference ran with it
    if w is not None and (not isinstance(w, torch.fx.Node) or shape_of(w) != (shape_of(x) or ())[1:]
                          and not (w.op == "get_attr" and shape_of(w) is None)):
        return None
    if t.meta["tensor_meta"].dtype not in (torch.int64, torch.int32):
        return None  # class probabilities as targets: library call
    # per row: logsumexp(x) - x[target] (nll: -x[target]), rows with target == ignore_index excluded
    tu = _method(g, "unsqueeze", t, 1)
    lse = None if log_probs else _call(g, torch.logsumexp, x, 1, keepdim=True)
    picked = _call(g, torch.gather, x, 1, tu)
    valid = _call(g, torch.ne, tu, int(a["ignore_index"]))
    per_row = _call(g, torch.neg, picked) if lse is None else _call(g, torch.sub, lse, picked)
    # torch (LossNLL.cpp): with class weights w, row i counts w[t_i] times, and the mean
    # divides by the sum of w[t_i] over the rows not ignored; w[t_i] is picked like x[t_i]
    # from w broadcast over the rows (zeros_like(x) + w: no gather of a parameter view)
    wrow = _call(g, torch.add, _call(g, torch.zeros_like, x), w) if w is not None else None
    wt = _call(g, torch.gather, wrow, 1, tu) if wrow is not None else None
    if wt is not None:
        per_row = _call(g, torch.mul, per_row, wt)
    if smoothing:
        # (1 - e) * nll + e / C * sum_c w_c * (lse - x_c), the smoothing term zero on ignored rows
        assert lse is not None
        logp = _call(g, torch.sub, x, lse)
        smooth = _call(g, torch.neg, _call(g, torch.sum, logp if wrow is None else _call(g, torch.mul, logp, wrow),
                                           1, keepdim=True))
        per_row = _call(g, torch.add, _call(g, torch.mul, per_row, 1.0 - float(smoothing)),
                        _call(g, torch.div, _call(g, torch.mul, smooth, float(smoothing)), _method(g, "size", x, 1)))
    loss = _call(g, torch.where, valid, per_row, 0.0)
    if a["reduction"] == "none":
        return _method(g, "squeeze", loss, 1)
    if a["reduction"] == "sum":
        return _call(g, torch.sum, loss)
    if a["reduction"] != "mean":
        return None
    count = _call(g, torch.sum, _call(g, torch.where, valid, 1.0 if wt is None else wt, 0.0))
    return _call(g, torch.div, _call(g, torch.sum, loss), count)


_REDUCE_ARGS = [("size_average", None), ("reduce", None), ("reduction", "mean")]


def _legacy(a: dict[str, Any]) -> bool:
    """The deprecated size_average / reduce flags are set: no rewrite."""
    return a["size_average"] is not None or a["reduce"] is not None


def _pairwise_distance(g: torch.fx.Graph, x1: Any, x2: Any, p: float, eps: float) -> torch.fx.Node:
    """F.pairwise_distance: the p-norm of x1 - x2 + eps over the last dim."""
    return _call(g, torch.norm, _call(g, torch.add, _call(g, torch.sub, x1, x2), eps), p=p, dim=-1)


def _triplet_margin(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("anchor", _REQ), ("positive", _REQ), ("negative", _REQ), ("margin", 1.0), ("p", 2),
                        ("eps", 1e-6), ("swap", False)] + _REDUCE_ARGS)
    if a is None or _legacy(a) or not all(isinstance(a[k], (int, float)) for k in ("margin", "p", "eps")) \
            or a["p"] <= 0:
        return None
    x, pos, neg = a["anchor"], a["positive"], a["negative"]
    if shape_of(x) is None or len(shape_of(x) or ()) not in (1, 2) or not shape_of(x) == shape_of(pos) == shape_of(neg):
        return None
    p, eps = float(a["p"]), float(a["eps"])
    d_ap = _pairwise_distance(g, x, pos, p, eps)
    d_an = _pairwise_distance(g, x, neg, p, eps)
    if a["swap"]:
        d_an = _call(g, torch.minimum, d_an, _pairwise_distance(g, pos, neg, p, eps))
    v = _call(g, torch.clamp_min, _call(g, torch.sub, _call(g, torch.add, d_ap, float(a["margin"])), d_an), 0.0)
    return _loss_reduce(g, v, a["reduction"])


def _margin_ranking(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input1", _REQ), ("input2", _REQ), ("target", _REQ), ("margin", 0.0)] + _REDUCE_ARGS)
    if a is None or _legacy(a) or not isinstance(a["margin"], (int, float)):
        return None
    if not shape_of(a["input1"]) == shape_of(a["input2"]) == shape_of(a["target"]) or shape_of(a["input1"]) is None:
        return None
    # max(0, -y * (x1 - x2) + margin)
    diff = _call(g, torch.sub, a["input1"], a["input2"])
    v = _call(g, torch.add, _call(g, torch.mul, _call(g, torch.neg, a["target"]), diff), float(a["margin"]))
    return _loss_reduce(g, _call(g, torch.clamp_min, v, 0.0), a["reduction"])


def _hinge_embedding(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("margin", 1.0)] + _REDUCE_ARGS)
    if a is None or _legacy(a) or not isinstance(a["margin"], (int, float)) \
            or shape_of(a["input"]) != shape_of(a["target"]):
        return None
    x, y = a["input"], a["target"]
    # as ATen: where(y != 1, max(0, margin - x), 0) + where(y != -1, x, 0)
    hinge = _call(g, torch.clamp_min, _call(g, torch.rsub, x, float(a["margin"])), 0.0)
    v = _call(g, torch.add, _call(g, torch.where, _call(g, torch.ne, y, 1.0), hinge, 0.0),
              _call(g, torch.where, _call(g, torch.ne, y, -1.0), x, 0.0))
    return _loss_reduce(g, v, a["reduction"])


def _cosine_embedding(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input1", _REQ), ("input2", _REQ), ("target", _REQ), ("margin", 0.0)] + _REDUCE_ARGS)
    if a is None or _legacy(a) or not isinstance(a["margin"], (int, float)):
        return None
    x1, x2, y = a["input1"], a["input2"], a["target"]
    s1 = shape_of(x1)
    if s1 is None or len(s1) != 2 or shape_of(x2) != s1 or shape_of(y) != s1[:1]:
        return None
    # as ATen: three sums over the same rows (one kernel after sibling fusion), eps 1e-12
    dot = _call(g, torch.sum, _call(g, torch.mul, x1, x2), -1)
    m1 = _call(g, torch.add, _call(g, torch.sum, _call(g, torch.mul, x1, x1), -1), 1e-12)
    m2 = _call(g, torch.add, _call(g, torch.sum, _call(g, torch.mul, x2, x2), -1), 1e-12)
    cos = _call(g, torch.div, dot, _call(g, torch.sqrt, _call(g, torch.mul, m1, m2)))
    pos = _call(g, torch.rsub, cos, 1.0)
    neg = _call(g, torch.clamp_min, _call(g, torch.sub, cos, float(a["margin"])), 0.0)
    v = _call(g, torch.add, _call(g, torch.where, _call(g, torch.eq, y, 1.0), pos, 0.0),
              _call(g, torch.where, _call(g, torch.eq, y, -1.0), neg, 0.0))
    return _loss_reduce(g, v, a["reduction"])


def _weighted(g: torch.fx.Graph, v: torch.fx.Node, weight: Any) -> torch.fx.Node:
    return v if weight is None else _call(g, torch.mul, v, weight)


def _bce(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("weight", None)] + _REDUCE_ARGS)
    if a is None or _legacy(a) or shape_of(a["input"]) is None or shape_of(a["input"]) != shape_of(a["target"]):
        return None
    x, t = a["input"], a["target"]
    # as ATen: (t - 1) * max(log1p(-x), -100) - t * max(log(x), -100)
    lo = _call(g, torch.clamp_min, _call(g, torch.log1p, _call(g, torch.neg, x)), -100.0)
    lx = _call(g, torch.clamp_min, _call(g, torch.log, x), -100.0)
    v = _call(g, torch.sub, _call(g, torch.mul, _call(g, torch.sub, t, 1.0), lo), _call(g, torch.mul, t, lx))
    return _loss_reduce(g, _weighted(g, v, a["weight"]), a["reduction"])


def _bce_logits(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("weight", None)] + _REDUCE_ARGS + [("pos_weight", None)])
    if a is None or _legacy(a) or shape_of(a["input"]) is None or shape_of(a["input"]) != shape_of(a["target"]):
        return None
    x, t = a["input"], a["target"]
    # as ATen: (1 - t) * x + lw * (log1p(exp(-|x|)) + max(-x, 0)), lw = (pw - 1) * t + 1
    soft = _call(g, torch.add, _call(g, torch.log1p, _call(g, torch.exp, _call(g, torch.neg, _call(g, torch.abs, x)))),
                 _call(g, torch.clamp_min, _call(g, torch.neg, x), 0.0))
    if a["pos_weight"] is not None:
        lw = _call(g, torch.add, _call(g, torch.mul, _call(g, torch.sub, a["pos_weight"], 1.0), t), 1.0)
        soft = _call(g, torch.mul, lw, soft)
    v = _call(g, torch.add, _call(g, torch.mul, _call(g, torch.rsub, t, 1.0), x), soft)
    return _loss_reduce(g, _weighted(g, v, a["weight"]), a["reduction"])


def _soft_margin(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ)] + _REDUCE_ARGS)
    if a is None or _legacy(a) or shape_of(a["input"]) is None or shape_of(a["input"]) != shape_of(a["target"]):
        return None
    v = _call(g, torch.log1p, _call(g, torch.exp, _call(g, torch.neg, _call(g, torch.mul, a["input"], a["target"]))))
    return _loss_reduce(g, v, a["reduction"])


def _multi_margin(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("p", 1), ("margin", 1.0), ("weight", None)]
                 + _REDUCE_ARGS)
    if a is None or _legacy(a) or a["weight"] is not None or a["p"] not in (1, 2) \
            or not isinstance(a["margin"], (int, float)):
        return None
    x, y = a["input"], a["target"]
    sx = shape_of(x)
    if sx is None or len(sx) != 2 or shape_of(y) != sx[:1] or y.meta["tensor_meta"].dtype not in (torch.int64,
                                                                                                      torch.int32):
        return None
    margin = float(a["margin"])
    # per row: (sum_i max(0, margin - x[y] + x[i])^p - max(0, margin)^p) / C, the i = y
    # term being max(0, margin)^p exactly; the pick is a gather in the same row kernel
    picked = _call(g, torch.gather, x, 1, _method(g, "unsqueeze", y, 1))
    z = _call(g, torch.clamp_min, _call(g, torch.add, _call(g, torch.rsub, picked, margin), x), 0.0)
    if a["p"] == 2:
        z = _call(g, torch.mul, z, z)
    self_term = max(margin, 0.0) ** int(a["p"])
    v = _call(g, torch.div, _call(g, torch.sub, _call(g, torch.sum, z, 1), self_term), _method(g, "size", x, 1))
    return _loss_reduce(g, v, a["reduction"])


def _einsum(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """An einsum of any arity as batched matmuls (``_contract``), contracted left to right:
    each pair's indices that no later operand and not the output read are summed. An index
    only one operand holds and nothing else reads is summed first (a row reduction); a pair
    without a contracted index is a broadcast multiply. Views (permute, flatten, unsqueeze)
    bring each pair to ``[*batch, *m, K] @ [*batch, K, N]``; the matmul kernel reads the
    permuted operands through their strides. Left to the library: ellipses, an index
    repeated in one operand (a diagonal or trace), an index whose sizes differ between
    operands (size-1 broadcasting)."""
    if len(node.args) < 2 or node.kwargs or not isinstance(node.args[0], str):
        return None
    ops = list(node.args[1]) if len(node.args) == 2 and isinstance(node.args[1], (list, tuple)) else list(node.args[1:])
    eq = node.args[0].replace(" ", "")
    if "->" not in eq or "." in eq:
        return None
    lhs, out = eq.split("->")
    subs = lhs.split(",")
    shapes = [shape_of(v) if isinstance(v, torch.fx.Node) else None for v in ops]
    if len(subs) != len(ops) or not ops:
        return None
    if any(sh is None or len(sh) != len(sub) for sh, sub in zip(shapes, subs, strict=True)):
        return None
    if any(len(set(x)) != len(x) for x in [*subs, out]) or set(out) - set("".join(subs)):
        return None
    dims: dict[str, int] = {}
    for sub, sh in zip(subs, shapes, strict=True):
        for c, d in zip(sub, sh or (), strict=True):
            if dims.setdefault(c, d) != d:
                return None  # broadcasting a size-1 index: left to the library
    cur, cur_sub = ops[0], subs[0]
    for i in range(1, len(ops)):
        later = set(out).union(*subs[i + 1:])
        cur, cur_sub = _contract(g, (cur, cur_sub), (ops[i], subs[i]), later)
    cur, cur_sub = _sum_only(g, cur, cur_sub, set(out))
    if cur_sub != out:
        cur = _method(g, "permute", cur, *[cur_sub.index(c) for c in out])
    return cur


def _sum_only(g: torch.fx.Graph, x: Any, sub: str, keep: set[str]) -> tuple[Any, str]:
    """``x`` summed over its indices not in ``keep``."""
    drop = [i for i, c in enumerate(sub) if c not in keep]
    if not drop:
        return x, sub
    return _call(g, torch.sum, x, drop), "".join(c for c in sub if c in keep)


def _contract(g: torch.fx.Graph, a: tuple[Any, str], b: tuple[Any, str], keep: set[str]) -> tuple[Any, str]:
    """One einsum pair: the product of ``a`` and ``b`` summed over their shared indices
    that ``keep`` does not hold, as (node, its index string: batch + m + n)."""
    (x, sa), (y, sb) = a, b
    x, sa = _sum_only(g, x, sa, keep | set(sb))
    y, sb = _sum_only(g, y, sb, keep | set(sa))
    batch = [c for c in sa if c in sb and c in keep]
    ms = [c for c in sa if c not in sb]
    ns = [c for c in sb if c not in sa]
    ks = [c for c in sa if c in sb and c not in keep]
    res = "".join(batch + ms + ns)
    if not ks:  # no contraction: a broadcast product in the result's index order
        return _call(g, torch.mul, _align(g, x, sa, res), _align(g, y, sb, res)), res
    nb, nk = len(batch), len(ks)
    x = _permuted(g, x, sa, batch + ms + ks)
    if nk > 1:
        x = _method(g, "flatten", x, -nk, -1)
    if not ms:
        x = _method(g, "unsqueeze", x, -2)
    y = _permuted(g, y, sb, batch + ks + ns)
    if nk > 1:
        y = _method(g, "flatten", y, nb, nb + nk - 1)
    if len(ns) > 1:
        y = _method(g, "flatten", y, -len(ns), -1)
    if not ns:
        y = _method(g, "unsqueeze", y, -1)
    for _ in range(len(ms) - 1 if batch else 0):
        # several m indices stay dims of a: b broadcasts over them (without batch indices b
        # is 2-D and the matmul folds a's leading dims into its rows)
        y = _method(g, "unsqueeze", y, nb)
    z = _call(g, torch.matmul, x, y)
    if not ms:
        z = _method(g, "squeeze", z, -2)
    if not ns:
        z = _method(g, "squeeze", z, -1)
    elif len(ns) > 1:
        z = _method(g, "unflatten", z, -1, tuple(_method(g, "size", b[0], b[1].index(c)) for c in ns))
    return z, res


def _permuted(g: torch.fx.Graph, x: Any, sub: str, order: list[str]) -> Any:
    perm = [sub.index(c) for c in order]
    return x if perm == sorted(perm) else _method(g, "permute", x, *perm)


def _align(g: torch.fx.Graph, x: Any, sub: str, res: str) -> Any:
    """``x`` viewed in the index order ``res``, a size-1 dim for each index it lacks."""
    x = _permuted(g, x, sub, [c for c in res if c in sub])
    for i, c in enumerate(res):
        if c not in sub:
            x = _method(g, "unsqueeze", x, i)
    return x


def _shifted_cumsum(node: Any, dim: int) -> Any:
    """x when ``node`` is ``cumsum(x, dim)[..., :-1]`` (all but the last element along
    ``dim``, every other dim whole), else None."""
    if not (isinstance(node, torch.fx.Node) and node.op == "call_function" and node.target is operator.getitem):
        return None
    scan, idx = node.args
    op = normalize(scan, None) if isinstance(scan, torch.fx.Node) and scan.op != "call_module" else None  # type: ignore[arg-type]
    rank = len(shape_of(scan) or ()) if isinstance(scan, torch.fx.Node) else 0
    if op is None or op.op != "cumsum" or op.args.get("reverse") or not rank or \
            not isinstance(op.args["dim"], int) or op.args["dim"] % rank != dim % rank:
        return None
    idx = idx if isinstance(idx, tuple) else (idx,)
    if Ellipsis in idx:
        at = idx.index(Ellipsis)
        idx = idx[:at] + (slice(None),) * (rank - len(idx) + 1) + idx[at + 1:]
    if len(idx) > rank or not all(isinstance(i, slice) and i.step is None for i in idx):
        return None
    idx = idx + (slice(None),) * (rank - len(idx))
    for d, i in enumerate(idx):
        want = (None, -1) if d == dim % rank else (None, None)
        if (i.start if i.start != 0 else None, i.stop) != want:
            return None
    return op.args["input"]


_ZEROS = {torch.zeros_like, torch.zeros}


def _exclusive_cat(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``cat([zeros(... 1 ...), cumsum(x, d)[..., :-1]], d)``: the exclusive scan, as
    ``cumsum(x, d) - x`` (one row kernel)."""
    parts: Any = node.args[0] if node.args else node.kwargs.get("tensors")
    dim: Any = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
    if not isinstance(parts, (list, tuple)) or len(parts) != 2 or not isinstance(dim, int):
        return None
    zero, body = parts
    rank = len(shape_of(node) or ())
    if not rank or not isinstance(zero, torch.fx.Node) or (shape_of(zero) or ())[dim % rank:][:1] != (1,):
        return None
    is_zero = (zero.op == "call_function" and zero.target in _ZEROS) or (
        zero.op == "call_method" and zero.target == "new_zeros")
    x = _shifted_cumsum(body, dim)
    if not is_zero or x is None or shape_of(x) != shape_of(node):
        return None
    return _call(g, torch.sub, _call(g, torch.cumsum, x, dim), x)


def _exclusive_pad(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``F.pad(cumsum(x, -1)[..., :-1], (1, 0))`` (zero fill): the exclusive scan of the
    last dim, as ``cumsum(x, -1) - x``."""
    a = _fn_args(node, [("input", _REQ), ("pad", _REQ), ("mode", "constant"), ("value", None)])
    if a is None or a["mode"] != "constant" or a["value"] not in (None, 0, 0.0) or list(a["pad"]) != [1, 0]:
        return None
    x = _shifted_cumsum(a["input"], -1)
    if x is None or shape_of(x) != shape_of(node):
        return None
    return _call(g, torch.sub, _call(g, torch.cumsum, x, -1), x)


def _poisson_nll(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _fn_args(node, [("input", _REQ), ("target", _REQ), ("log_input", True), ("full", False),
                        ("size_average", None), ("eps", 1e-8), ("reduce", None), ("reduction", "mean")])
    if a is None or _legacy(a) or not isinstance(a["eps"], (int, float)) \
            or shape_of(a["input"]) is None or shape_of(a["input"]) != shape_of(a["target"]):
        return None
    x, t = a["input"], a["target"]
    if a["log_input"]:
        v = _call(g, torch.sub, _call(g, torch.exp, x), _call(g, torch.mul, t, x))
    else:
        v = _call(g, torch.sub, x, _call(g, torch.mul, t, _call(g, torch.log, _call(g, torch.add, x, float(a["eps"])))))
    if a["full"]:
        # Stirling's term t * log(t) - t + 0.5 * log(2 * pi * t), where t > 1 (torch's masked_fill)
        st = _call(g, torch.add, _call(g, torch.sub, _call(g, torch.mul, t, _call(g, torch.log, t)), t),
                   _call(g, torch.mul, _call(g, torch.log, _call(g, torch.mul, t, 2 * math.pi)), 0.5))
        v = _call(g, torch.add, v, _call(g, torch.where, _call(g, torch.gt, t, 1.0), st, 0.0))
    return _loss_reduce(g, v, a["reduction"])


_FUNCTIONS: dict[Any, Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None]] = {
    F.poisson_nll_loss: _poisson_nll,
    torch.cat: _exclusive_cat,
    F.pad: _exclusive_pad,
    torch.einsum: _einsum,
    F.triplet_margin_loss: _triplet_margin,
    F.margin_ranking_loss: _margin_ranking,
    F.hinge_embedding_loss: _hinge_embedding,
    F.cosine_embedding_loss: _cosine_embedding,
    F.binary_cross_entropy: _bce,
    F.binary_cross_entropy_with_logits: _bce_logits,
    F.soft_margin_loss: _soft_margin,
    F.multi_margin_loss: _multi_margin,
    F.mse_loss: _mse,
    F.l1_loss: _l1,
    F.smooth_l1_loss: lambda g, n: _huber(g, n, smooth_l1=True),
    F.huber_loss: lambda g, n: _huber(g, n, smooth_l1=False),
    F.kl_div: _kl_div,
    F.cross_entropy: _cross_entropy,
    F.nll_loss: lambda g, n: _cross_entropy(g, n, log_probs=True),
    F.normalize: _normalize,
    F.cosine_similarity: _cosine,
    torch.cosine_similarity: _cosine,
}
# the remaining matmul shapes (dot, mv, addmv, outer, addr, baddbmm, addbmm, kron, ...): matmul_shapes.py
_FUNCTIONS.update(MATMUL_REWRITES)
# functional norms with weights as inputs (group / layer norm, their native tuples, LRN): norm_functional.py
_FUNCTIONS.update(NORM_REWRITES)  # type: ignore[arg-type]
# softmin, glu, prelu, dist, pairwise_distance, renorm, gaussian NLL, multilabel soft margin
_FUNCTIONS.update(MISC_REWRITES)


def _global_avg_pool(g: torch.fx.Graph, node: torch.fx.Node, mod: nn.Module) -> torch.fx.Node | None:
    """Adaptive average pooling to one output element per plane is a mean over the
    spatial dims (the usual classifier-head global pool)."""
    nd = 1 if isinstance(mod, nn.AdaptiveAvgPool1d) else 2 if isinstance(mod, nn.AdaptiveAvgPool2d) else 3
    size = mod.output_size
    if size not in (1, (1,) * nd, [1] * nd):
        return None
    shape = shape_of(node.args[0])
    if shape is None or len(shape) not in (nd + 1, nd + 2):
        return None
    return _call(g, torch.mean, node.args[0], list(range(-nd, 0)), keepdim=True)


# Loss and similarity modules call one functional with their own settings: the rewrite
# of that functional serves the module form too (``self.criterion = nn.CrossEntropyLoss()``).
_MODULE_FUNCTIONALS: dict[type[nn.Module], tuple[Any, tuple[str, ...]]] = {
    nn.CrossEntropyLoss: (F.cross_entropy, ("weight", "ignore_index", "reduction", "label_smoothing")),
    nn.NLLLoss: (F.nll_loss, ("weight", "ignore_index", "reduction")),
    nn.MSELoss: (F.mse_loss, ("reduction",)),
    nn.L1Loss: (F.l1_loss, ("reduction",)),
    nn.SmoothL1Loss: (F.smooth_l1_loss, ("reduction", "beta")),
    nn.HuberLoss: (F.huber_loss, ("reduction", "delta")),
    nn.KLDivLoss: (F.kl_div, ("reduction", "log_target")),
    nn.CosineSimilarity: (F.cosine_similarity, ("dim", "eps")),
    nn.TripletMarginLoss: (F.triplet_margin_loss, ("margin", "p", "eps", "swap", "reduction")),
    nn.MarginRankingLoss: (F.margin_ranking_loss, ("margin", "reduction")),
    nn.HingeEmbeddingLoss: (F.hinge_embedding_loss, ("margin", "reduction")),
    nn.CosineEmbeddingLoss: (F.cosine_embedding_loss, ("margin", "reduction")),
    nn.BCELoss: (F.binary_cross_entropy, ("weight", "reduction")),
    nn.BCEWithLogitsLoss: (F.binary_cross_entropy_with_logits, ("weight", "reduction", "pos_weight")),
    nn.SoftMarginLoss: (F.soft_margin_loss, ("reduction",)),
    nn.PoissonNLLLoss: (F.poisson_nll_loss, ("log_input", "full", "eps", "reduction")),
    nn.MultiMarginLoss: (F.multi_margin_loss, ("p", "margin", "weight", "reduction")),
}


def _as_functional(g: torch.fx.Graph, node: torch.fx.Node, *, mod: nn.Module) -> torch.fx.Node | None:
    fn, settings = _MODULE_FUNCTIONALS[type(mod)]
    # a weight buffer of the loss module (BCELoss(weight=...)) is read through get_attr
    values = {k: g.get_attr(f"{node.target}.{k}") if isinstance(getattr(mod, k), torch.Tensor) else getattr(mod, k)
              for k in settings}
    call = _call(g, fn, *node.args, **node.kwargs, **values)
    try:
        return _FUNCTIONS[fn](g, call)
    finally:
        g.erase_node(call)  # the rewrite reads the call's arguments, never the call itself
        for v in values.values():
            if isinstance(v, torch.fx.Node) and not v.users:
                g.erase_node(v)


def _module_rewrite(mod: nn.Module) -> Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None] | None:
    if isinstance(mod, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d)):
        return lambda g, n: _global_avg_pool(g, n, mod)
    if isinstance(mod, nn.modules.batchnorm._BatchNorm):
        return lambda g, n: _batch_norm(g, n, mod)
    if isinstance(mod, nn.modules.instancenorm._InstanceNorm):
        return lambda g, n: _instance_norm(g, n, mod)
    if isinstance(mod, nn.GroupNorm):
        return lambda g, n: _group_norm(g, n, mod)
    return None


def fuse_attention(spec: CapturedSpec, apply: bool) -> int:
    """Find matmul -> scale -> [mask] -> softmax -> matmul chains (attention written in
    plain ops, ``attention_chain.py``); with ``apply`` replace each mask-free one by one
    scaled_dot_product_attention call, which the flash kernel lowers (a masked chain keeps
    its nodes: the planner takes it as one attention op, ``overrides.attention_overrides``).
    Returns the number of chains found, masked or not."""
    gm, graph = spec.gm, spec.gm.graph
    found = 0
    rewritten = 0
    for node in list(graph.nodes):
        match = match_chain(node, gm) if node.op in ("call_function", "call_method") else None
        if match is None:
            continue
        found += 1
        if not apply or match.mask is not None:
            continue
        rewritten += 1
        with graph.inserting_before(node):
            sc = scale_value(match.scale)
            if isinstance(sc, tuple):
                sc = _call(graph, operator.truediv, 1.0, sc[1])
            new = _call(graph, F.scaled_dot_product_attention, match.q, match.k, match.v, scale=sc)
        node.replace_all_uses_with(new)
        graph.erase_node(node)
        for dead in match.inner:  # scores, scale, softmax: now unused
            if not dead.users:
                graph.erase_node(dead)
    if rewritten:
        gm.recompile()
        propagate_shapes(gm, spec.inputs, spec.shape_context)
    return found


# side-effect-free producers a rewrite may leave unread (the zeros and the slice around
# an exclusive scan): erased, so they are neither launched nor counted as fallbacks
_PURE_FUNCTIONS = {operator.getitem, torch.zeros_like, torch.zeros, torch.cumsum}
_PURE_METHODS = {"new_zeros", "cumsum"}


def _erase_unused(graph: torch.fx.Graph, nodes: list[torch.fx.Node]) -> None:
    while nodes:
        n = nodes.pop()
        if n.users or n.graph is not graph or not (
                (n.op == "call_function" and n.target in _PURE_FUNCTIONS) or
                (n.op == "call_method" and n.target in _PURE_METHODS)):
            continue
        inputs = list(n.all_input_nodes)
        graph.erase_node(n)
        nodes.extend(inputs)


def decompose(spec: CapturedSpec) -> int:
    """Rewrite the captured graph in place; returns the number of nodes rewritten."""
    total = split_multi_outputs(spec.gm)
    # a rewrite reads its operands' shapes: one whose operands an earlier rewrite of the same
    # pass produced (the loss of F.normalize'd embeddings) is tried again after shape propagation
    for _ in range(3):
        count = _decompose_pass(spec)
        total += count
        if not count:
            break
    return total


def _decompose_pass(spec: CapturedSpec) -> int:
    gm = spec.gm
    graph = gm.graph
    count = 0
    for node in list(graph.nodes):
        rewrite: Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None] | None = None
        if node.op == "call_module":
            mod = gm.get_submodule(str(node.target))
            if type(mod) in _MODULE_FUNCTIONALS:
                rewrite = functools.partial(_as_functional, mod=mod)
            else:
                rewrite = _module_rewrite(mod)
                if rewrite is not None and (len(node.args) != 1 or node.kwargs):
                    rewrite = None
        elif node.op == "call_function":
            rewrite = _FUNCTIONS.get(node.target)
        if rewrite is None:
            continue
        with graph.inserting_before(node):
            try:
                new = rewrite(graph, node)
            except (TypeError, ValueError, AttributeError) as exc:
                log.debug("rewrite of %s skipped: %s", node, exc)
                new = None
        if new is None:
            continue
        inputs = list(node.all_input_nodes)
        if isinstance(new, tuple):  # a tuple-valued op (native_layer_norm): one node per item
            replace_parts(graph, node, new)
        else:
            node.replace_all_uses_with(new)
        graph.erase_node(node)
        _erase_unused(graph, inputs)
        count += 1
    if count:
        gm.recompile()
        propagate_shapes(gm, spec.inputs, spec.shape_context, new_only=spec.fake_mode is not None)
    return count
