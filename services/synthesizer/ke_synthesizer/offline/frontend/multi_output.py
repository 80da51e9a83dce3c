"""Operators with several outputs, as one node per output.

``torch.var_mean`` / ``std_mean`` become a ``var`` / ``std`` and a ``mean`` node,
``torch.aminmax`` an ``amin`` and an ``amax`` node; every other tuple-valued call a forward
returns as it is (``return torch.max(x, 1)``) gets one ``getitem`` per element, so the
tuple's parts are values the families lower (``torch.max(x, dim)``'s ``getitem`` users are
``amax`` / ``argmax``: overrides.max_dim_overrides). The forward then returns a plain tuple
of the same tensors.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx

# tuple-valued op -> the single-output ops computing each element, with the arguments each takes
_PARTS: dict[Any, tuple[tuple[Any, tuple[str, ...]], ...]] = {
    torch.var_mean: ((torch.var, ("dim", "unbiased", "correction", "keepdim")), (torch.mean, ("dim", "keepdim"))),
    torch.std_mean: ((torch.std, ("dim", "unbiased", "correction", "keepdim")), (torch.mean, ("dim", "keepdim"))),
    torch.aminmax: ((torch.amin, ("dim", "keepdim")), (torch.amax, ("dim", "keepdim"))),
}
# positional parameters after the input, per op (var_mean(x, dim, unbiased, keepdim) is the
# legacy overload; var_mean(x, True) its unbiased-only form)
_POSITIONAL: dict[Any, tuple[str, ...]] = {
    torch.var_mean: ("dim", "unbiased", "keepdim"),
    torch.std_mean: ("dim", "unbiased", "keepdim"),
    torch.aminmax: (),
}


def _bound(node: torch.fx.Node) -> dict[str, Any] | None:
    names = _POSITIONAL[node.target]
    rest = node.args[1:]
    if len(rest) == 1 and isinstance(rest[0], bool) and node.target is not torch.aminmax:
        return {"unbiased": rest[0], **node.kwargs}
    if len(rest) > len(names):
        return None
    return {**dict(zip(names, rest, strict=False)), **node.kwargs}


def _metas(node: torch.fx.Node) -> tuple[Any, ...] | None:
    meta = node.meta.get("tensor_meta")
    if isinstance(meta, (tuple, list)) and meta and all(hasattr(m, "shape") for m in meta):
        return tuple(meta)
    return None


def split_multi_outputs(gm: torch.fx.GraphModule) -> int:
    """Rewrite ``gm`` in place; returns the number of tuple-valued nodes split."""
    graph = gm.graph
    count = 0
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        metas = _metas(node)
        if metas is None:
            continue
        parts: list[torch.fx.Node] = []
        with graph.inserting_after(node):
            if node.target in _PARTS:
                kwargs = _bound(node)
                if kwargs is None:
                    continue
                for fn, names in reversed(_PARTS[node.target]):
                    kw = {k: v for k, v in kwargs.items() if k in names and v is not None}
                    if fn in (torch.amin, torch.amax) and "dim" not in kw:
                        kw.pop("keepdim", None)
                    parts.insert(0, graph.call_function(fn, (node.args[0],), kw))
            elif any(u.op == "output" for u in node.users):
                parts = [graph.call_function(operator.getitem, (node, i)) for i in reversed(range(len(metas)))][::-1]
            else:
                continue
        for part, meta in zip(parts, metas, strict=True):
            part.meta["tensor_meta"] = meta
        for user in list(node.users):
            if user in parts:
                continue
            if user.op == "call_function" and user.target is operator.getitem and isinstance(user.args[1], int) \
                    and node.target in _PARTS:
                user.replace_all_uses_with(parts[user.args[1]])
                graph.erase_node(user)
            elif user.op == "output":
                user.args = tuple(_replace(a, node, tuple(parts)) for a in user.args)
        if not node.users:
            graph.erase_node(node)
        count += 1
    if count:
        graph.lint()
        gm.recompile()
    return count


def _replace(value: Any, node: torch.fx.Node, parts: tuple[torch.fx.Node, ...]) -> Any:
    if value is node:
        return parts
    if isinstance(value, (tuple, list)):
        return type(value)(_replace(v, node, parts) for v in value)
    return value
