"""Overrides: fx patterns planned as one canonical op each, the nodes they replace
hidden (never emitted). ``torch.max(x, dim)`` tuples become amax / argmax of their
getitem users; ``flip(scan(flip(x)))`` becomes one reverse scan; ``tril(a @ b)``,
``triu(...)`` and ``tril(a) @ b`` become one masked matmul; masked attention in plain
ops (``attention_chain.py``) becomes one attention op."""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

from .attention_chain import match_chain, scale_value
from .fx_meta import shape_of
from .ops import NormOp, normalize


def scan_overrides(nodes: list[torch.fx.Node], gm: torch.fx.GraphModule,
                   hidden: dict[torch.fx.Node, list[torch.fx.Node]]) -> dict[torch.fx.Node, NormOp]:
    """flip(scan(flip(x, [d]), d), [d]) is a reverse scan: the outer flip becomes one
    op and the inner two nodes are never materialised."""
    out: dict[torch.fx.Node, NormOp] = {}
    for node in nodes:
        if not _is_flip(node):
            continue
        scan = node.args[0]
        if not isinstance(scan, torch.fx.Node) or len(scan.users) != 1:
            continue
        op = cummax_op(scan) or normalize(scan, gm)
        if op is None or op.op not in ("cumsum", "cumprod", "cummax", "cummin"):
            continue
        inner = op.args["input"]
        if not (_is_flip(inner) and len(inner.users) == 1):
            continue
        rank = len(shape_of(node) or ())
        dims_outer, dims_inner = _flip_dims(node), _flip_dims(inner)
        d = op.args["dim"]
        if not rank or not isinstance(d, int) or not all(isinstance(v, (list, tuple)) and len(v) == 1
                                                         for v in (dims_outer, dims_inner)):
            continue
        if not (dims_outer[0] % rank == dims_inner[0] % rank == d % rank):
            continue
        out[node] = NormOp(op.op, {"input": inner.args[0], "dim": d, "reverse": True})
        hidden[node] = [inner, scan] + ([scan.args[0]] if scan.args[0] is not inner else [])
    return out


def _is_flip(node: Any) -> bool:
    return isinstance(node, torch.fx.Node) and (
        (node.op == "call_function" and node.target is torch.flip)
        or (node.op == "call_method" and node.target == "flip"))


def _flip_dims(node: torch.fx.Node) -> Any:
    """The dims of ``torch.flip(x, dims)``, ``x.flip(dims)`` or ``x.flip(d0, d1, ...)``."""
    if "dims" in node.kwargs:
        dims = node.kwargs["dims"]
    elif len(node.args) == 2:
        dims = node.args[1]
    else:
        dims = list(node.args[1:])
    return [dims] if isinstance(dims, int) else dims


def cummax_op(node: Any) -> NormOp | None:
    """A cummax / cummin of ``getitem(cummax(x, d), 0)`` or ``cummax(x, d).values`` (the
    values of the tuple; indices stay a library call): a scan op reading x."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    if not ((node.target is operator.getitem and node.args[1] == 0) or
            (node.target is getattr and node.args[1] == "values")):
        return None
    tup = node.args[0]
    # `values, _ = torch.cummax(x, d)` traces a getitem for the unread indices too
    if not isinstance(tup, torch.fx.Node) or any(u is not node and u.users for u in tup.users):
        return None
    if tup.op == "call_function" and tup.target in (torch.cummax, torch.cummin):
        name = tup.target.__name__
    elif tup.op == "call_method" and tup.target in ("cummax", "cummin"):
        name = str(tup.target)
    else:
        return None
    d: Any = tup.args[1] if len(tup.args) > 1 else tup.kwargs.get("dim")
    if not isinstance(d, int) or set(tup.kwargs) - {"dim"}:
        return None
    return NormOp(name, {"input": tup.args[0], "dim": d, "reverse": False})


def cummax_overrides(nodes: list[torch.fx.Node], gm: torch.fx.GraphModule,
                     hidden: dict[torch.fx.Node, list[torch.fx.Node]]) -> dict[torch.fx.Node, NormOp]:
    """The values of torch.cummax / cummin as a scan op of their own (the tuple node is
    never materialised)."""
    out: dict[torch.fx.Node, NormOp] = {}
    for node in nodes:
        op = cummax_op(node)
        if op is not None:
            out[node] = op
            tup = node.args[0]
            assert isinstance(tup, torch.fx.Node)
            hidden[node] = [tup] + [u for u in tup.users if u is not node]  # the tuple, unread indices
    return out


def max_dim_overrides(nodes: list[torch.fx.Node], gm: torch.fx.GraphModule,
                      hidden: dict[torch.fx.Node, list[torch.fx.Node]]) -> dict[torch.fx.Node, NormOp]:
    """torch.max(x, dim) returns (values, indices): its getitem users become amax /
    argmax ops of their own (the tuple itself is then never materialised)."""
    out: dict[torch.fx.Node, NormOp] = {}
    for node in nodes:
        if node.op not in ("call_function", "call_method"):
            continue
        op = normalize(node, gm)
        if op is None or op.op not in ("max_dim", "min_dim"):
            continue
        users = list(node.users)
        part = {}
        for u in users:
            if u.op == "call_function" and u.target is operator.getitem and u.args[1] in (0, 1):
                part[u] = u.args[1]
            elif u.op == "call_function" and u.target is getattr and u.args[1] in ("values", "indices"):
                part[u] = 0 if u.args[1] == "values" else 1
        if not users or len(part) != len(users):
            continue
        for u in users:
            kind = ("amax" if op.op == "max_dim" else "amin") if part[u] == 0 else (
                "argmax" if op.op == "max_dim" else "argmin")
            out[u] = NormOp(kind, {"input": op.args["input"], "dim": op.args["dim"],
                                   "keepdim": op.args["keepdim"]})
            hidden[u] = [node]
    return out


def _triangle(node: Any) -> tuple[str, int, Any] | None:
    """("lower" | "upper", diagonal, input) of a tril / triu call with a constant
    diagonal, else None."""
    if not isinstance(node, torch.fx.Node):
        return None
    if node.op == "call_function" and node.target in (torch.tril, torch.triu):
        name = node.target.__name__
    elif node.op == "call_method" and node.target in ("tril", "triu"):
        name = str(node.target)
    else:
        return None
    diag: Any = node.args[1] if len(node.args) > 1 else node.kwargs.get("diagonal", 0)
    if not isinstance(diag, int) or isinstance(diag, bool) or set(node.kwargs) - {"diagonal"}:
        return None
    if len(shape_of(node) or ()) < 2:
        return None
    return ("lower" if name == "tril" else "upper", diag, node.args[0])


def triangular_overrides(nodes: list[torch.fx.Node], gm: torch.fx.GraphModule,
                         hidden: dict[torch.fx.Node, list[torch.fx.Node]]) -> dict[torch.fx.Node, NormOp]:
    """A matmul whose output is masked to a triangle (``tril(a @ b)``) or whose operand
    is one (``tril(a) @ b``) is one matmul op with ``out_tri`` / ``a_tri`` / ``b_tri``
    (kind, diagonal): the kernel skips the tiles and K ranges the mask zeroes."""
    out: dict[torch.fx.Node, NormOp] = {}
    for node in nodes:
        tri = _triangle(node)
        if tri is not None:
            mm = tri[2]
            op = normalize(mm, gm) if isinstance(mm, torch.fx.Node) and len(mm.users) == 1 else None
            if op is not None and op.op == "matmul" and mm not in out and \
                    len(shape_of(op.args["input"]) or ()) >= 2 and len(shape_of(op.args["other"]) or ()) >= 2:
                out[node] = NormOp("matmul", {**op.args, "out_tri": tri[:2]})
                hidden[node] = [mm]
            continue
        if node.op not in ("call_function", "call_method"):
            continue
        op = normalize(node, gm)
        if op is None or op.op != "matmul":
            continue
        args = dict(op.args)
        hide = []
        known = False
        for key, tri_key in (("input", "a_tri"), ("other", "b_tri")):
            t = _triangle(args[key])
            if t is not None and args[key] in out:
                # the operand is itself a masked product (tril(q @ k^T) @ v): it is stored, and
                # this matmul still skips the K range where it is zero
                args[tri_key], known = t[:2], True
            elif t is not None and len(args[key].users) == 1 and len(shape_of(t[2]) or ()) >= 2:
                args[key], args[tri_key] = t[2], t[:2]
                hide.append(op.args[key])
        if known and not hide:
            out[node] = NormOp("matmul", args)
        elif hide and not any(h in hidden.get(n, []) for n in out for h in hide):
            out[node] = NormOp("matmul", args)
            hidden[node] = hide
    return out


def attention_overrides(nodes: list[torch.fx.Node], gm: torch.fx.GraphModule,
                        hidden: dict[torch.fx.Node, list[torch.fx.Node]]) -> dict[torch.fx.Node, NormOp]:
    """``softmax(mask(q @ k^T * s)) @ v`` is one attention op at its last matmul: the
    scores, the mask op and the softmax are never materialised (mask-free chains were
    rewritten into ``scaled_dot_product_attention`` by the decomposition already). The
    op keeps the softmax's semantics: an all ``-inf`` row is NaN (``nan_rows``)."""
    out: dict[torch.fx.Node, NormOp] = {}
    for node in nodes:
        chain = match_chain(node, gm) if node.op in ("call_function", "call_method") else None
        if chain is None or chain.mask is None:
            continue
        args: dict[str, Any] = {"input": chain.q, "key": chain.k, "value": chain.v}
        if chain.mask.tensor is not None:
            args["mask"] = chain.mask.tensor
        out[node] = NormOp("attention", args, extra={
            "causal": chain.mask.causal, "scale": scale_value(chain.scale), "mask": chain.mask, "nan_rows": True})
        hidden[node] = list(chain.inner)
    return out
