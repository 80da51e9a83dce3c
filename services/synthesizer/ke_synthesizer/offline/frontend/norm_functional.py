"""Normalisations in functional form, with weights (and statistics) as inputs, as
compositions of ops the families lower: ``F.group_norm`` and ``torch.native_group_norm``
(a mean and a centred variance per (sample, group), then the per-channel affine),
``torch.native_layer_norm`` (the same over the trailing dims), and
``F.local_response_norm`` (the channel window's mean of squares: a constant pad and an
average pool, as torch itself computes it).

The ``native_*`` ops return ``(out, mean, rstd)``: their rewrite returns the three nodes
and ``decompose`` hands each getitem (or the forward's output) its part. The statistics are
the row kernel's per-row values: the mean and ``1 / sqrt(var + eps)`` of the biased
variance, in the shape torch gives them (``[N, G]`` for group norm, the leading dims with
the normalised ones kept as 1 for layer norm).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx
import torch.nn.functional as F

from .fx_meta import dtype_of, shape_of

Parts = torch.fx.Node | tuple[torch.fx.Node, ...]
Rewrite = Callable[[torch.fx.Graph, torch.fx.Node], Parts | None]


def _args(node: torch.fx.Node, names: list[str]) -> dict[str, Any]:
    a = dict(zip(names, node.args, strict=False))
    a.update(node.kwargs)
    return a


def _float(v: Any) -> bool:
    d = dtype_of(v)
    return isinstance(v, torch.fx.Node) and shape_of(v) is not None and d is not None and d.is_floating_point


def _optional(v: Any, shape: tuple[int, ...]) -> bool:
    """None, or a floating tensor of ``shape``."""
    return v is None or (_float(v) and shape_of(v) == shape)


def _call(g: torch.fx.Graph, fn: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
    return g.call_function(fn, tuple(args), kwargs)


def _stats(g: torch.fx.Graph, x: Any, dims: list[int], eps: float) -> tuple[torch.fx.Node, ...]:
    """(x - mean) * rstd, mean and rstd over ``dims`` (keepdim, biased variance)."""
    mu = _call(g, torch.mean, x, dims, keepdim=True)
    d = _call(g, torch.sub, x, mu)
    var = _call(g, torch.mean, _call(g, torch.mul, d, d), dims, keepdim=True)
    rstd = _call(g, torch.rsqrt, _call(g, torch.add, var, eps))
    return _call(g, torch.mul, d, rstd), mu, rstd


def _affine(g: torch.fx.Graph, y: torch.fx.Node, w: Any, b: Any, view: list[int] | None) -> torch.fx.Node:
    """y * w + b, each viewed as ``view`` when given (per channel over dim 1)."""
    for v, fn in ((w, torch.mul), (b, torch.add)):
        if v is not None:
            y = _call(g, fn, y, g.call_method("view", (v, *view)) if view else v)
    return y


def _grouped(g: torch.fx.Graph, x: Any, groups: Any, w: Any, b: Any, eps: Any) -> tuple[torch.fx.Node, ...] | None:
    shape = shape_of(x)
    if not _float(x) or shape is None or len(shape) < 2 or not isinstance(groups, int) or groups < 1 \
            or shape[1] % groups or not isinstance(eps, (int, float)):
        return None
    if not (_optional(w, (shape[1],)) and _optional(b, (shape[1],))):
        return None
    n = shape[0]
    y, mu, rstd = _stats(g, g.call_method("reshape", (x, n, groups, -1)), [-1], float(eps))
    y = _affine(g, g.call_method("reshape", (y, *shape)), w, b, [-1] + [1] * (len(shape) - 2))
    return y, g.call_method("reshape", (mu, n, groups)), g.call_method("reshape", (rstd, n, groups))


def _group_norm(g: torch.fx.Graph, node: torch.fx.Node) -> Parts | None:
    a = _args(node, ["input", "num_groups", "weight", "bias", "eps"])
    parts = _grouped(g, a.get("input"), a.get("num_groups"), a.get("weight"), a.get("bias"), a.get("eps", 1e-5))
    return None if parts is None else parts[0]


def _native_group_norm(g: torch.fx.Graph, node: torch.fx.Node) -> Parts | None:
    a = _args(node, ["input", "weight", "bias", "N", "C", "HxW", "group", "eps"])
    x = a.get("input")
    if not parts_readable(node):
        return None
    shape = shape_of(x)
    if shape is None or len(shape) < 2 or (a.get("N"), a.get("C")) != shape[:2]:
        return None
    return _grouped(g, x, a.get("group"), a.get("weight"), a.get("bias"), a.get("eps"))


def _native_layer_norm(g: torch.fx.Graph, node: torch.fx.Node) -> Parts | None:
    a = _args(node, ["input", "normalized_shape", "weight", "bias", "eps"])
    x, norm = a.get("input"), a.get("normalized_shape")
    shape = shape_of(x)
    if not parts_readable(node) or not _float(x) or shape is None or not isinstance(norm, (list, tuple)) or not norm \
            or not isinstance(a.get("eps"), (int, float)):
        return None
    k = len(norm)
    if k > len(shape) or tuple(shape[-k:]) != tuple(norm):
        return None
    if not (_optional(a.get("weight"), tuple(norm)) and _optional(a.get("bias"), tuple(norm))):
        return None
    y, mu, rstd = _stats(g, x, list(range(len(shape) - k, len(shape))), float(a["eps"]))
    return _affine(g, y, a.get("weight"), a.get("bias"), None), mu, rstd


def _local_response_norm(g: torch.fx.Graph, node: torch.fx.Node) -> Parts | None:
    """torch's own definition: x / (k + alpha * mean of x^2 over a window of ``size``
    channels, zero padded (size // 2 before, (size - 1) // 2 after)) ** beta."""
    a = _args(node, ["input", "size", "alpha", "beta", "k"])
    x, size = a.get("input"), a.get("size")
    alpha, beta, k = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("k", 1.0)
    shape = shape_of(x)
    if not _float(x) or shape is None or len(shape) < 3 or not isinstance(size, int) or size < 1 \
            or not all(isinstance(v, (int, float)) for v in (alpha, beta, k)):
        return None
    sq = _call(g, torch.mul, x, x)
    if len(shape) == 3:
        padded = _call(g, F.pad, g.call_method("unsqueeze", (sq, 1)), (0, 0, size // 2, (size - 1) // 2))
        div = g.call_method("squeeze", (_call(g, F.avg_pool2d, padded, (size, 1), stride=1), 1))
    else:
        five = g.call_method("view", (sq, shape[0], 1, shape[1], shape[2], -1))
        padded = _call(g, F.pad, five, (0, 0, 0, 0, size // 2, (size - 1) // 2))
        pooled = g.call_method("squeeze", (_call(g, F.avg_pool3d, padded, (size, 1, 1), stride=1), 1))
        div = g.call_method("view", (pooled, *shape))
    div = _call(g, torch.pow, _call(g, torch.add, _call(g, torch.mul, div, float(alpha)), float(k)), float(beta))
    return _call(g, torch.div, x, div)


NORM_REWRITES: dict[Any, Rewrite] = {
    F.group_norm: _group_norm,
    torch.native_group_norm: _native_group_norm,
    torch.native_layer_norm: _native_layer_norm,
    F.local_response_norm: _local_response_norm,
}


def _item(user: torch.fx.Node, node: torch.fx.Node) -> bool:
    return user.op == "call_function" and getattr(user.target, "__name__", "") == "getitem" \
        and len(user.args) == 2 and user.args[0] is node and isinstance(user.args[1], int)


def parts_readable(node: torch.fx.Node) -> bool:
    """Every reader of tuple-valued ``node`` takes one item of it, or returns it."""
    return all(u.op == "output" or _item(u, node) for u in node.users)


def replace_parts(graph: torch.fx.Graph, node: torch.fx.Node, parts: tuple[torch.fx.Node, ...]) -> None:
    """Hand each reader of tuple-valued ``node`` its part: ``node[i]`` becomes part i, the
    forward's output the tuple of parts (``parts_readable`` holds)."""
    for user in list(node.users):
        if _item(user, node):
            user.replace_all_uses_with(parts[user.args[1]])  # type: ignore[index]
            graph.erase_node(user)
        else:
            user.args = tuple(_swap(a, node, parts) for a in user.args)


def _swap(value: Any, node: torch.fx.Node, parts: tuple[torch.fx.Node, ...]) -> Any:
    if value is node:
        return parts
    if isinstance(value, (tuple, list)):
        return type(value)(_swap(v, node, parts) for v in value)
    return value
