"""The remaining matmul shapes as compositions of ops the families lower: dot / vdot /
1-D matmul / inner of vectors as a sum of products (one row kernel), mv and addmv as a
matrix-vector ``matmul`` (the matmul family) plus a scaled pointwise term, outer / ger and
addr as a broadcast product, baddbmm and addbmm as ``bmm`` (and a sum over the batch),
kron as a broadcast product of unsqueezed operands flattened pairwise (views).

``beta`` scales the added input, ``alpha`` the product, as torch defines them; ``beta ==
0`` drops the input (torch ignores it then: a NaN there does not propagate). Real
operands only (vdot conjugates its first operand, which changes nothing for them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from .fx_meta import dtype_of, shape_of

Rewrite = Callable[[torch.fx.Graph, torch.fx.Node], torch.fx.Node | None]


def _args(node: torch.fx.Node, names: list[str]) -> dict[str, Any]:
    a = dict(zip(names, node.args, strict=False))
    a.update(node.kwargs)
    return a


def _real(*vs: Any) -> bool:
    return all(isinstance(v, torch.fx.Node) and shape_of(v) is not None and dtype_of(v) is not None
               and dtype_of(v).is_floating_point for v in vs)  # type: ignore[union-attr]


def _rank(v: Any) -> int:
    return len(shape_of(v) or ())


def _scaled(g: torch.fx.Graph, v: torch.fx.Node, s: Any) -> torch.fx.Node:
    return v if s == 1 else g.call_function(torch.mul, (v, s))


def _plus_input(g: torch.fx.Graph, prod: torch.fx.Node, c: Any, beta: Any, alpha: Any) -> torch.fx.Node | None:
    """beta * c + alpha * prod (c dropped when beta is 0)."""
    if not (isinstance(beta, (int, float)) and isinstance(alpha, (int, float))):
        return None
    prod = _scaled(g, prod, alpha)
    if beta == 0:
        return prod
    return g.call_function(torch.add, (_scaled(g, c, beta), prod))


def _dot(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "other"])
    x, y = a.get("input"), a.get("other", a.get("tensor"))
    if not _real(x, y) or _rank(x) != 1 or _rank(y) != 1:
        return None
    return g.call_function(torch.sum, (g.call_function(torch.mul, (x, y)),))


def _matmul(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    """Only vector . vector (the matmul family takes every other shape)."""
    return _dot(g, node)


def _inner(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, y = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    if not _real(x, y) or node.kwargs.keys() - {"other"}:
        return None
    if _rank(x) == 1 and _rank(y) == 1:
        return _dot(g, node)
    if _rank(x) == 2 and _rank(y) in (1, 2):
        other = y if _rank(y) == 1 else g.call_method("transpose", (y, 0, 1))
        return g.call_function(torch.matmul, (x, other))
    return None


def _mv(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "vec"])
    m, v = a.get("input"), a.get("vec")
    if not _real(m, v) or _rank(m) != 2 or _rank(v) != 1:
        return None
    return g.call_function(torch.matmul, (m, v))


def _addmv(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "mat", "vec", "beta", "alpha"])
    c, m, v = a.get("input"), a.get("mat"), a.get("vec")
    if not _real(c, m, v) or _rank(m) != 2 or _rank(v) != 1:
        return None
    return _plus_input(g, g.call_function(torch.matmul, (m, v)), c, a.get("beta", 1), a.get("alpha", 1))


def _outer_of(g: torch.fx.Graph, x: Any, y: Any) -> torch.fx.Node | None:
    if not _real(x, y) or _rank(x) != 1 or _rank(y) != 1:
        return None
    return g.call_function(torch.mul, (g.call_method("unsqueeze", (x, 1)), y))


def _outer(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "vec2"])
    return _outer_of(g, a.get("input"), a.get("vec2"))


def _addr(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    a = _args(node, ["input", "vec1", "vec2", "beta", "alpha"])
    prod = _outer_of(g, a.get("vec1"), a.get("vec2"))
    if prod is None or not _real(a.get("input")):
        return None
    return _plus_input(g, prod, a.get("input"), a.get("beta", 1), a.get("alpha", 1))


def _baddbmm(g: torch.fx.Graph, node: torch.fx.Node, summed: bool) -> torch.fx.Node | None:
    a = _args(node, ["input", "batch1", "batch2", "beta", "alpha"])
    c, x, y = a.get("input"), a.get("batch1"), a.get("batch2")
    if not _real(c, x, y) or _rank(x) != 3 or _rank(y) != 3:
        return None
    prod = g.call_function(torch.bmm, (x, y))
    if summed:
        prod = g.call_function(torch.sum, (prod, 0))
    return _plus_input(g, prod, c, a.get("beta", 1), a.get("alpha", 1))


def _kron(g: torch.fx.Graph, node: torch.fx.Node) -> torch.fx.Node | None:
    x, y = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs.get("other")
    r = _rank(x)
    if not _real(x, y) or r != _rank(y) or r == 0 or set(node.kwargs) - {"other"}:
        return None
    # x[i0, 1, i1, 1, ...] * y[1, j0, 1, j1, ...], then each (i_k, j_k) pair flattened
    xs, ys = x, y
    for d in range(r):
        xs = g.call_method("unsqueeze", (xs, 2 * d + 1))
        ys = g.call_method("unsqueeze", (ys, 2 * d))
    out = g.call_function(torch.mul, (xs, ys))
    for d in range(r):
        out = g.call_method("flatten", (out, d, d + 1))
    return out


MATMUL_REWRITES: dict[Any, Rewrite] = {
    torch.dot: _dot,
    torch.vdot: _dot,
    torch.inner: _inner,
    torch.matmul: _matmul,
    torch.mv: _mv,
    torch.addmv: _addmv,
    torch.outer: _outer,
    torch.ger: _outer,
    torch.addr: _addr,
    torch.baddbmm: lambda g, n: _baddbmm(g, n, summed=False),
    torch.addbmm: lambda g, n: _baddbmm(g, n, summed=True),
    torch.kron: _kron,
}
