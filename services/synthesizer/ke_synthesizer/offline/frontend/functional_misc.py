"""Functional odds and ends as compositions of ops the families lower, each as torch
defines it: ``F.softmin`` (softmax of the negation), ``F.glu`` (first half times the
sigmoid of the second), ``F.prelu`` (a per-channel slope for negative inputs),
``torch.dist`` and ``F.pairwise_distance`` (p-norms of a difference, the latter with
``eps`` added), ``torch.renorm`` (sub-tensors along ``dim`` whose p-norm exceeds ``maxnorm``
scaled to ``maxnorm / (norm + 1e-7)``), ``F.gaussian_nll_loss`` and
``F.multilabel_soft_margin_loss``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from .fx_meta import dtype_of, shape_of

Rewrite = Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None]


def _args(node: torch.fx.Node, names: list[str], defaults: dict[str, Any]) -> dict[str, Any] | None:
    if len(node.args) > len(names) or any(k not in names for k in node.kwargs):
        return None
    a = {**defaults, **dict(zip(names, node.args, strict=False)), **node.kwargs}
    return a if all(n in a for n in names) else None


def _float(*vs: Any) -> bool:
    return all(isinstance(v, torch.fx.Node) and shape_of(v) is not None and dtype_of(v) is not None
               and dtype_of(v).is_floating_point for v in vs)  # type: ignore[union-attr]


def _num(*vs: Any) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vs)


def _call(g: torch.fx.Graph, fn: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
    return g.call_function(fn, tuple(args), kwargs)


def _reduce(g: torch.fx.Graph, v: torch.fx.Node, reduction: Any) -> torch.fx.Node | None:
    if reduction == "none":
        return v
    if reduction in ("mean", "sum"):
        return _call(g, torch.mean if reduction == "mean" else torch.sum, v)
    return None


def _softmin(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "dim", "_stacklevel", "dtype"], {"dim": None, "_stacklevel": 3, "dtype": None})
    if a is None or not _float(a["input"]) or not isinstance(a["dim"], int):
        return None
    kw = {} if a["dtype"] is None else {"dtype": a["dtype"]}
    return _call(g, torch.softmax, _call(g, torch.neg, a["input"]), a["dim"], **kw)


def _glu(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "dim"], {"dim": -1})
    shape = shape_of(a["input"]) if a is not None else None
    if a is None or not _float(a["input"]) or not isinstance(a["dim"], int) or not shape or shape[a["dim"]] % 2:
        return None
    halves = g.call_method("chunk", (a["input"], 2, a["dim"]))
    first, second = (_call(g, operator.getitem, halves, i) for i in (0, 1))
    return _call(g, torch.mul, first, _call(g, torch.sigmoid, second))


def _prelu(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "weight"], {})
    if a is None or not _float(a["input"], a["weight"]):
        return None
    x, w = a["input"], a["weight"]
    shape, ws = shape_of(x) or (), shape_of(w) or ()
    if math.prod(ws) != 1:
        if len(shape) < 2 or ws != (shape[1],):
            return None
        w = g.call_method("view", (w, -1, *([1] * (len(shape) - 2))))
    return _call(g, torch.where, _call(g, torch.gt, x, 0.0), x, _call(g, torch.mul, x, w))


def _norm_of(g: torch.fx.Graph, v: torch.fx.Node, p: Any, **kw: Any) -> torch.fx.Node | None:
    if not _num(p) or p <= 0:
        return None  # p = 0 (a count of non-zeros) and negative p stay library calls
    return _call(g, torch.norm, v, p=float(p), **kw)


def _dist(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "other", "p"], {"p": 2})
    if a is None or not _float(a["input"], a["other"]):
        return None
    return _norm_of(g, _call(g, torch.sub, a["input"], a["other"]), a["p"])


def _pairwise_distance(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["x1", "x2", "p", "eps", "keepdim"], {"p": 2.0, "eps": 1e-6, "keepdim": False})
    if a is None or not _float(a["x1"], a["x2"]) or not _num(a["eps"]) or not isinstance(a["keepdim"], bool):
        return None
    if not shape_of(a["x1"]) and not shape_of(a["x2"]):
        return None
    diff = _call(g, torch.add, _call(g, torch.sub, a["x1"], a["x2"]), float(a["eps"]))
    return _norm_of(g, diff, a["p"], dim=-1, keepdim=a["keepdim"])


def _renorm(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "p", "dim", "maxnorm"], {})
    shape = shape_of(a["input"]) if a is not None else None
    if a is None or not _float(a["input"]) or not shape or not isinstance(a["dim"], int) or not _num(a["maxnorm"]):
        return None
    dim = a["dim"] % len(shape)
    others = [d for d in range(len(shape)) if d != dim]
    if not others:
        return None
    norm = _norm_of(g, a["input"], a["p"], dim=others, keepdim=True)
    if norm is None:
        return None
    maxnorm = float(a["maxnorm"])
    scale = _call(g, torch.div, maxnorm, _call(g, torch.add, norm, 1e-7))
    factor = _call(g, torch.where, _call(g, torch.gt, norm, maxnorm), scale, 1.0)
    return _call(g, torch.mul, a["input"], factor)


def _gaussian_nll(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "target", "var", "full", "eps", "reduction"],
              {"full": False, "eps": 1e-6, "reduction": "mean"})
    if a is None or not _float(a["input"], a["target"], a["var"]) or not _num(a["eps"]):
        return None
    x, t, var = a["input"], a["target"], a["var"]
    xs, vs = shape_of(x) or (), shape_of(var) or ()
    if vs != xs:
        if xs[:-1] == vs:
            var = g.call_method("unsqueeze", (var, -1))
        elif not (xs[:-1] == vs[:-1] and vs[-1:] == (1,)):
            return None  # torch raises on other shapes
    var = _call(g, torch.clamp_min, var, float(a["eps"]))
    d = _call(g, torch.sub, x, t)
    loss = _call(g, torch.mul, _call(g, torch.add, _call(g, torch.log, var),
                                     _call(g, torch.div, _call(g, torch.mul, d, d), var)), 0.5)
    if a["full"]:
        loss = _call(g, torch.add, loss, 0.5 * math.log(2 * math.pi))
    return _reduce(g, loss, a["reduction"])


def _multilabel_soft_margin(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "target", "weight", "size_average", "reduce", "reduction"],
              {"weight": None, "size_average": None, "reduce": None, "reduction": "mean"})
    if a is None or a["size_average"] is not None or a["reduce"] is not None or not _float(a["input"], a["target"]):
        return None
    x, t = a["input"], a["target"]
    shape = shape_of(x) or ()
    if not shape or shape_of(t) != shape or not (a["weight"] is None or _float(a["weight"])):
        return None
    pos = _call(g, torch.mul, t, _call(g, F.logsigmoid, x))
    neg = _call(g, torch.mul, _call(g, torch.rsub, t, 1.0), _call(g, F.logsigmoid, _call(g, torch.neg, x)))
    loss = _call(g, torch.neg, _call(g, torch.add, pos, neg))
    if a["weight"] is not None:
        loss = _call(g, torch.mul, loss, a["weight"])
    per_sample = _call(g, torch.div, _call(g, torch.sum, loss, len(shape) - 1), float(shape[-1]))
    return _reduce(g, per_sample, a["reduction"])


def _bilinear(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]`` as one matmul of x1 with
    W laid out ``[in1, out * in2]``, then the product with x2 summed over j (a row kernel)."""
    a = _args(node, ["input1", "input2", "weight", "bias"], {"bias": None})
    if a is None or not _float(a["input1"], a["input2"], a["weight"]) or not (a["bias"] is None or _float(a["bias"])):
        return None
    x1, x2, w = a["input1"], a["input2"], a["weight"]
    s1, s2, ws = shape_of(x1) or (), shape_of(x2) or (), shape_of(w) or ()
    if len(ws) != 3 or not s1 or s1[:-1] != s2[:-1] or (s1[-1], s2[-1]) != ws[1:]:
        return None
    out, in1, in2 = ws
    rows = math.prod(s1[:-1])
    wt = g.call_method("reshape", (g.call_method("permute", (w, 1, 0, 2)), in1, out * in2))
    t = _call(g, torch.matmul, g.call_method("reshape", (x1, rows, in1)), wt)
    t = _call(g, torch.mul, g.call_method("view", (t, rows, out, in2)), g.call_method("reshape", (x2, rows, 1, in2)))
    y = _call(g, torch.sum, t, -1)
    if a["bias"] is not None:
        y = _call(g, torch.add, y, a["bias"])
    return g.call_method("reshape", (y, *s1[:-1], out))


def _trace(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """The sum of the diagonal, read as a strided view of the flat matrix (every n + 1-th
    element, min(m, n) of them): one row kernel, no copy."""
    a = _args(node, ["input"], {})
    shape = shape_of(a["input"]) if a is not None else None
    if a is None or not _float(a["input"]) or shape is None or len(shape) != 2 or 0 in shape:
        return None
    m, n = shape
    diag = _call(g, operator.getitem, g.call_method("flatten", (a["input"],)), slice(None, min(m, n) * (n + 1), n + 1))
    return _call(g, torch.sum, diag)


def _linear_cross_entropy(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """``cross_entropy(linear(input, W, b), target, ...)``: the cross-entropy rewrite takes it
    from there on the next pass."""
    a = _args(node, ["input", "linear_weight", "target", "linear_bias", "weight", "reduction", "ignore_index",
                     "label_smoothing", "options"],
              {"linear_bias": None, "weight": None, "reduction": "mean", "ignore_index": None,
               "label_smoothing": 0.0, "options": None})
    if a is None or a["options"] is not None or not _float(a["input"], a["linear_weight"]):
        return None
    logits = _call(g, F.linear, a["input"], a["linear_weight"], a["linear_bias"])
    ignore = -100 if a["ignore_index"] is None else a["ignore_index"]
    return _call(g, F.cross_entropy, logits, a["target"], weight=a["weight"], ignore_index=ignore,
                 reduction=a["reduction"], label_smoothing=a["label_smoothing"])


MISC_REWRITES: dict[Any, Rewrite] = {
    torch.bilinear: _bilinear,
    F.bilinear: _bilinear,
    torch.trace: _trace,
    F.softmin: _softmin,
    F.glu: _glu,
    F.prelu: _prelu,
    torch.dist: _dist,
    F.pairwise_distance: _pairwise_distance,
    torch.pairwise_distance: _pairwise_distance,
    torch.renorm: _renorm,
    F.gaussian_nll_loss: _gaussian_nll,
    F.multilabel_soft_margin_loss: _multilabel_soft_margin,
}
if hasattr(F, "linear_cross_entropy"):  # torch 2.13 on
    MISC_REWRITES[F.linear_cross_entropy] = _linear_cross_entropy
