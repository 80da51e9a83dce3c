"""Recognising data movement and indexing ops: every spelling (function, method,
module) of one op becomes ``NormOp("index", {...}, extra={"form", "kind", ...})``.

Three forms, each one kernel shape (``kernel_index.py``):

- ``gather``: every output element is read from a source address computed from its
  coordinates (flip, roll, cat, stack, tril / triu, repeat / tile, pad in every mode,
  index_select, gather, embedding, pixel (un)shuffle, repeat_interleave, bucketize /
  searchsorted);
- ``bag``: one program per segment and column block walks the segment's entries
  (embedding_bag with offsets or fixed bags, sum / mean / max, per-sample weights,
  padding_idx; segment_reduce over offsets or lengths);
- ``scatter``: the output starts as a copy of the destination and every source element
  is added (or stored) at its index (index_add, scatter_add, scatter, index_copy).

Only the recognised arguments' *values* matter to the generated code; sizes are always
read at run time. Anything outside what is listed here stays a library call.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from ...frontend.fx_meta import dtype_of, shape_of
from ...frontend.ops import NormOp

INDEX_DTYPES = (torch.int64, torch.int32)
_PAD_MODULES = {
    nn.ZeroPad1d: "constant", nn.ZeroPad2d: "constant", nn.ZeroPad3d: "constant",
    nn.ConstantPad1d: "constant", nn.ConstantPad2d: "constant", nn.ConstantPad3d: "constant",
    nn.ReflectionPad1d: "reflect", nn.ReflectionPad2d: "reflect", nn.ReflectionPad3d: "reflect",
    nn.ReplicationPad1d: "replicate", nn.ReplicationPad2d: "replicate", nn.ReplicationPad3d: "replicate",
    nn.CircularPad1d: "circular", nn.CircularPad2d: "circular", nn.CircularPad3d: "circular",
}
# the most sources one cat / stack kernel reads (each a masked load per element)
MAX_SOURCES = 16


def _bind(node: torch.fx.Node, names: list[str]) -> dict[str, Any]:
    """Arguments of a call by name (positional, then keywords)."""
    args = dict(zip(names, node.args, strict=False))
    args.update(node.kwargs)
    return args


def _target(node: torch.fx.Node) -> tuple[str, Any]:
    if node.op == "call_function":
        return "f", node.target
    if node.op == "call_method":
        return "m", str(node.target)
    return "", None


def _is(node: torch.fx.Node, funcs: tuple[Any, ...], method: str | None) -> bool:
    kind, t = _target(node)
    return (kind == "f" and any(t is f for f in funcs)) or (kind == "m" and method is not None and t == method)


def _dims(v: Any, rank: int) -> tuple[int, ...] | None:
    vals = (v,) if isinstance(v, int) else tuple(v) if isinstance(v, (list, tuple)) else None
    if vals is None or not all(isinstance(d, int) and -rank <= d < max(rank, 1) for d in vals):
        return None
    return tuple(d % rank for d in vals)


def _tensor(v: Any) -> bool:
    return isinstance(v, torch.fx.Node) and shape_of(v) is not None


def _op(form: str, kind: str, sources: list[Any], **extra: Any) -> NormOp:
    return NormOp("index", {"input": sources[0]}, extra={"form": form, "kind": kind, "sources": sources, **extra})


def index_op(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    """The index NormOp of ``node``, or None when it is not one of this family's ops."""
    if node.op == "call_module":
        return _module(node, gm)
    kind, t = _target(node)
    if not kind:
        return None
    for recognise in (_take, _copy, _rot90, _stack_like, _take_flat, _diag, _flip, _roll, _cat, _stack, _tri,
                      _repeat, _pad, _index_fill, _index_select, _gather, _embedding, _pixel, _repeat_interleave,
                      _bucketize, _searchsorted, _interpolate, _embedding_bag, _segment_reduce, _scatter):
        found = recognise(node)
        if found is not None:
            return found
    return None


def _module(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    mod: Any = gm.get_submodule(str(node.target))
    x = node.args[0] if node.args else node.kwargs.get("input")
    if not _tensor(x):
        return None
    if type(mod) in _PAD_MODULES:
        value = float(getattr(mod, "value", 0.0))
        return _pad_op(x, tuple(mod.padding), _PAD_MODULES[type(mod)], value)
    if type(mod) is nn.PixelShuffle:
        return _op("gather", "pixel_shuffle", [x], r=int(mod.upscale_factor))
    if type(mod) is nn.PixelUnshuffle:
        return _op("gather", "pixel_unshuffle", [x], r=int(mod.downscale_factor))
    if type(mod) is nn.Embedding and mod.max_norm is None and dtype_of(x) in INDEX_DTYPES:
        return _op("gather", "embedding", [x, f"@{node.target}.weight"])
    if type(mod) is nn.EmbeddingBag and mod.max_norm is None:
        offsets = node.args[1] if len(node.args) > 1 else node.kwargs.get("offsets")
        psw = node.args[2] if len(node.args) > 2 else node.kwargs.get("per_sample_weights")
        return _bag_op(x, f"@{node.target}.weight", offsets, mod.mode, psw, bool(mod.include_last_offset),
                       mod.padding_idx)
    return None


def _take(node: torch.fx.Node) -> NormOp | None:
    """Advanced indexing ``x[:, i, j]``: integer index tensors of one shape on adjacent
    dims, full slices elsewhere (the index shape replaces the indexed dims, as in torch);
    negative indices wrap. Boolean masks (a data-dependent shape) stay library calls."""
    if not (node.op == "call_function" and node.target is operator.getitem) or len(node.args) != 2:
        return None
    x, key = node.args
    if not _tensor(x):
        return None
    items = key if isinstance(key, tuple) else (key,)
    xs = shape_of(x) or ()
    if len(items) > len(xs):
        return None
    dims = []
    for p, it in enumerate(items):
        if _tensor(it) and dtype_of(it) in INDEX_DTYPES:
            dims.append(p)
        elif not (isinstance(it, slice) and it == slice(None)):
            return None
    if not dims or dims != list(range(dims[0], dims[0] + len(dims))):
        return None
    shapes = {shape_of(items[p]) for p in dims}
    if len(shapes) != 1:
        return None
    (ish,) = shapes
    first = dims[0]
    if shape_of(node) != (*xs[:first], *(ish or ()), *xs[first + len(dims):]):
        return None
    return _op("gather", "take", [x] + [items[p] for p in dims], first=first, count=len(dims))


# ops whose result is a view (or a view's copy) of one input: the launcher takes the view
# (metadata only) and the kernel copies it through its strides; ``post`` reshapes the
# contiguous result (free). name -> (function, its parameter names, Tensor method, post)
_COPIES: dict[str, tuple[Any, list[str], str, str]] = {
    "clone": (torch.clone, ["input"], "", ""),
    "alias_copy": (torch.alias_copy, ["input"], "", ""),
    "detach_copy": (torch.detach_copy, ["input"], "", ""),
    "select": (torch.select, ["input", "dim", "index"], "select", ""),
    "select_copy": (torch.select_copy, ["input", "dim", "index"], "select", ""),
    "diagonal": (torch.diagonal, ["input", "offset", "dim1", "dim2"], "diagonal", ""),
    "diagonal_copy": (torch.diagonal_copy, ["input", "offset", "dim1", "dim2"], "diagonal", ""),
    "unfold": (torch.Tensor.unfold, ["input", "dimension", "size", "step"], "unfold", ""),
    "unfold_copy": (torch.unfold_copy, ["input", "dimension", "size", "step"], "unfold", ""),
    "expand_copy": (torch.expand_copy, ["input", "size"], "expand", ""),
    "broadcast_to": (torch.broadcast_to, ["input", "size"], "expand", ""),
    "permute_copy": (torch.permute_copy, ["input", "dims"], "permute", ""),
    "transpose_copy": (torch.transpose_copy, ["input", "dim0", "dim1"], "transpose", ""),
    "t_copy": (torch.t_copy, ["input"], "t", ""),
    "unsqueeze_copy": (torch.unsqueeze_copy, ["input", "dim"], "unsqueeze", ""),
    "squeeze_copy": (torch.squeeze_copy, ["input", "dim"], "squeeze", ""),
    "narrow_copy": (torch.narrow_copy, ["input", "dim", "start", "length"], "narrow", ""),
    "view_copy": (torch.view_copy, ["input", "size"], "", "view"),
    "ravel": (torch.ravel, ["input"], "", "view(-1)"),
}


def _literal_args(vals: list[Any]) -> str | None:
    """Source of constant call arguments (ints, int lists), or None for a graph value."""
    out = []
    for v in vals:
        if isinstance(v, (list, tuple)) and all(isinstance(i, int) for i in v):
            out.append(repr(tuple(v)))
        elif isinstance(v, int) and not isinstance(v, bool):
            out.append(repr(v))
        else:
            return None
    return ", ".join(out)


def _copy(node: torch.fx.Node) -> NormOp | None:
    kind, t = _target(node)
    found = next((c for c in _COPIES.values() if (kind == "f" and t is c[0])
                  or (kind == "m" and c[2] in ("select", "diagonal", "unfold") and t == c[2])), None)
    if found is None:
        return None
    _, params, method, post = found
    a = _bind(node, params)
    x = a.pop("input", a.pop("self", None))
    if not _tensor(x) or a.pop("memory_format", None) not in (None, torch.preserve_format, torch.contiguous_format):
        return None
    rest = [a[p] for p in params[1:] if p in a]
    if len(rest) != len(a):
        return None
    args = _literal_args(rest)
    if args is None:
        return None
    view = f"x0.{method}({args})" if method else "x0"
    if post == "view":
        post = f"view({args})"
    return _op("gather", "copy", [x], view=view, post=post)


def _rot90(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.rot90,), "rot90"):
        return None
    a = _bind(node, ["input", "k", "dims"])
    x, k, dims = a.get("input"), a.get("k", 1), a.get("dims", (0, 1))
    rank = len(shape_of(x) or ()) if _tensor(x) else 0
    dd = _dims(dims, rank) if rank >= 2 else None
    if dd is None or len(dd) != 2 or dd[0] == dd[1] or not isinstance(k, int):
        return None
    return _op("gather", "rot90", [x], k=k % 4, dims=dd)


def _stack_like(node: torch.fx.Node) -> NormOp | None:
    """vstack / column_stack / dstack: a stack of inputs of one rank below the result's,
    or a cat of inputs of the result's rank (the atleast_Nd views torch inserts)."""
    # function -> (the stacked / concatenated dim, the rank of inputs that are stacked)
    forms = {torch.vstack: (0, 1), torch.row_stack: (0, 1), torch.column_stack: (1, 1), torch.dstack: (2, 2)}
    fn = next((f for f in forms if _is(node, (f,), None)), None)
    if fn is None:
        return None
    dim, low = forms[fn]
    ts = _seq(node.args[0] if node.args else node.kwargs.get("tensors"))
    if ts is None:
        return None
    ranks = {len(shape_of(t) or ()) for t in ts}
    if ranks == {low}:
        return _op("gather", "stack", ts, dim=dim) if len({shape_of(t) for t in ts}) == 1 else None
    if len(ranks) == 1 and min(ranks) > low:
        return _op("gather", "cat", ts, dim=dim)
    return None


def _take_flat(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.take,), "take"):
        return None
    a = _bind(node, ["input", "index"])
    x, idx = a.get("input"), a.get("index")
    if not (_tensor(x) and _tensor(idx)) or dtype_of(idx) not in INDEX_DTYPES or not shape_of(idx):
        return None
    return _op("gather", "take_flat", [x, idx])


def _diag(node: torch.fx.Node) -> NormOp | None:
    """diag of a vector (a matrix with the vector on diagonal ``k``) and diag_embed (the
    last dim on the diagonal of dims ``dim1``, ``dim2`` of the result); diag of a matrix
    is its diagonal (a copy of the view)."""
    if _is(node, (torch.diag,), "diag"):
        a = _bind(node, ["input", "diagonal"])
        x, k = a.get("input"), a.get("diagonal", 0)
        if not _tensor(x) or not isinstance(k, int):
            return None
        rank = len(shape_of(x) or ())
        if rank == 2:
            return _op("gather", "copy", [x], view=f"torch.diagonal(x0, {k})", post="")
        return _op("gather", "diag_embed", [x], offset=k, dim1=0, dim2=1) if rank == 1 else None
    if _is(node, (torch.diagflat,), "diagflat"):
        a = _bind(node, ["input", "offset"])
        x, k = a.get("input"), a.get("offset", 0)
        if not _tensor(x) or not isinstance(k, int):
            return None
        return _op("gather", "diag_embed", [x], offset=k, dim1=0, dim2=1, flat=True)
    if _is(node, (torch.diag_embed,), "diag_embed"):
        a = _bind(node, ["input", "offset", "dim1", "dim2"])
        x, k = a.get("input"), a.get("offset", 0)
        out = shape_of(node)
        if not _tensor(x) or not isinstance(k, int) or out is None:
            return None
        dd = _dims((a.get("dim1", -2), a.get("dim2", -1)), len(out))
        if dd is None or dd[0] == dd[1]:
            return None
        return _op("gather", "diag_embed", [x], offset=k, dim1=dd[0], dim2=dd[1])
    return None


def _flip(node: torch.fx.Node) -> NormOp | None:
    kind, t = _target(node)
    if _is(node, (torch.fliplr, torch.flipud), "fliplr") or _is(node, (), "flipud"):
        x = node.args[0]
        name = t if kind == "m" else t.__name__
        return _op("gather", "flip", [x], dims=(1,) if name == "fliplr" else (0,)) if _tensor(x) else None
    if not _is(node, (torch.flip,), "flip"):
        return None
    x = node.args[0]
    if not _tensor(x):
        return None
    if kind == "m" and len(node.args) > 2:
        raw: Any = tuple(node.args[1:])
    else:
        raw = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims")
    dims = _dims(raw, len(shape_of(x) or ()))
    return None if dims is None else _op("gather", "flip", [x], dims=tuple(sorted(set(dims))))


def _roll(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.roll,), "roll"):
        return None
    a = _bind(node, ["input", "shifts", "dims"])
    x, shifts, dims = a.get("input"), a.get("shifts"), a.get("dims")
    if not _tensor(x):
        return None
    rank = len(shape_of(x) or ())
    sh = (shifts,) if isinstance(shifts, int) else tuple(shifts) if isinstance(shifts, (list, tuple)) else None
    if sh is None or not all(isinstance(s, int) for s in sh):
        return None
    if dims is None or dims == () or dims == []:
        return _op("gather", "roll", [x], shifts=(sum(sh),), dims=None) if len(sh) == 1 else None
    dd = _dims(dims, rank)
    if dd is None or len(dd) != len(sh):
        return None
    total: dict[int, int] = {}
    for d, s in zip(dd, sh, strict=True):
        total[d] = total.get(d, 0) + s
    return _op("gather", "roll", [x], shifts=tuple(total.values()), dims=tuple(total))


def _seq(v: Any) -> list[Any] | None:
    if isinstance(v, (list, tuple)) and v and all(_tensor(t) for t in v) and len(v) <= MAX_SOURCES:
        return list(v)
    return None


def _cat(node: torch.fx.Node) -> NormOp | None:
    if _is(node, (torch.cat, torch.concat, torch.concatenate), None):
        a = _bind(node, ["tensors", "dim"])
        ts, dim = _seq(a.get("tensors")), a.get("dim", a.get("axis", 0))
    elif _is(node, (torch.hstack,), None):
        ts = _seq(node.args[0] if node.args else node.kwargs.get("tensors"))
        dim = None if ts is None else (0 if len(shape_of(ts[0]) or ()) == 1 else 1)
    else:
        return None
    out = shape_of(node)
    if ts is None or not isinstance(dim, int) or out is None or not out:
        return None
    rank = len(out)
    # torch skips legacy empty 1-D inputs of shape (0,) next to tensors of another rank
    ts = [t for t in ts if len(shape_of(t) or ()) == rank]
    if not ts or not -rank <= dim < rank:
        return None
    return _op("gather", "cat", ts, dim=dim % rank)


def _stack(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.stack,), None):
        return None
    a = _bind(node, ["tensors", "dim"])
    ts, dim = _seq(a.get("tensors")), a.get("dim", 0)
    out = shape_of(node)
    if ts is None or not isinstance(dim, int) or out is None or len({shape_of(t) for t in ts}) != 1:
        return None
    return _op("gather", "stack", ts, dim=dim % len(out))


def _tri(node: torch.fx.Node) -> NormOp | None:
    for name, fn in (("tril", torch.tril), ("triu", torch.triu)):
        if _is(node, (fn,), name):
            a = _bind(node, ["input", "diagonal"])
            x, diag = a.get("input"), a.get("diagonal", 0)
            if _tensor(x) and len(shape_of(x) or ()) >= 2 and isinstance(diag, int):
                return _op("gather", name, [x], diagonal=diag)
    return None


def _repeat(node: torch.fx.Node) -> NormOp | None:
    kind, t = _target(node)
    if kind == "m" and t == "repeat":
        x = node.args[0]
        sizes: Any = node.args[1] if len(node.args) == 2 and isinstance(node.args[1], (list, tuple)) \
            else tuple(node.args[1:]) or node.kwargs.get("repeats")
    elif _is(node, (torch.tile,), "tile"):
        a = _bind(node, ["input", "dims"])
        x, sizes = a.get("input"), a.get("dims")
        if isinstance(sizes, (list, tuple)):
            sizes = (1,) * (len(shape_of(x) or ()) - len(sizes)) + tuple(sizes) if _tensor(x) else None
    else:
        return None
    if not _tensor(x) or not isinstance(sizes, (list, tuple)) or not all(isinstance(s, int) for s in sizes):
        return None
    if len(sizes) < len(shape_of(x) or ()) or not sizes:
        return None
    return _op("gather", "repeat", [x], sizes=tuple(sizes))


def _pad_op(x: Any, pad: tuple[int, ...], mode: str, value: float | None) -> NormOp | None:
    rank = len(shape_of(x) or ())
    if len(pad) % 2 or len(pad) // 2 > rank or not all(isinstance(p, int) for p in pad):
        return None
    if mode not in ("constant", "replicate") and any(p < 0 for p in pad):
        return None
    # pad lists (left, right) pairs from the last dim backwards
    pairs = {rank - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)}
    return _op("gather", "pad", [x], pairs=pairs, mode=mode, value=value or 0.0)


def _pad(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (F.pad, torch.constant_pad_nd), None):
        return None
    a = _bind(node, ["input", "pad", "mode", "value"])
    x, pad, mode, value = a.get("input"), a.get("pad"), a.get("mode", "constant"), a.get("value")
    if not _tensor(x) or not isinstance(pad, (list, tuple)) or mode not in ("constant", "reflect", "replicate",
                                                                         "circular"):
        return None
    if value is not None and not isinstance(value, (int, float)):
        return None
    return _pad_op(x, tuple(pad), mode, None if value is None else float(value))


_INTERP_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "trilinear", "bicubic")


def _interpolate(node: torch.fx.Node) -> NormOp | None:
    """F.interpolate / F.upsample* / nn.Upsample in the modes each output element computes
    from a fixed set of taps (nearest, nearest-exact, (bi / tri)linear, bicubic), without
    antialiasing; ``area`` (an adaptive average) stays a library call."""
    if _is(node, (F.interpolate, F.upsample), None):
        a = _bind(node, ["input", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor",
                         "antialias"])
    elif _is(node, (F.upsample_bilinear,), None):
        a = {**_bind(node, ["input", "size", "scale_factor"]), "mode": "bilinear", "align_corners": True}
    elif _is(node, (F.upsample_nearest,), None):
        a = {**_bind(node, ["input", "size", "scale_factor"]), "mode": "nearest"}
    else:
        return None
    x, mode = a.get("input"), a.get("mode", "nearest")
    if not _tensor(x) or mode not in _INTERP_MODES or a.get("antialias") or a.get("recompute_scale_factor"):
        return None
    nd = len(shape_of(x) or ()) - 2
    size, sf = a.get("size"), a.get("scale_factor")
    if nd < 1 or (mode == "bicubic" and nd != 2) or (size is None) == (sf is None):
        return None
    size = (size,) * nd if isinstance(size, int) else tuple(size) if size is not None else None
    sf = (float(sf),) * nd if isinstance(sf, (int, float)) else tuple(float(v) for v in sf) if sf is not None else None
    if (size is not None and (len(size) != nd or not all(isinstance(v, int) for v in size))) or \
            (sf is not None and len(sf) != nd):
        return None
    linear = mode in ("linear", "bilinear", "trilinear", "bicubic")
    return _op("gather", "interpolate", [x], mode=mode, size=size, scale=sf,
               align=bool(a.get("align_corners")) if linear else False)


def _index_fill(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.index_fill,), "index_fill"):
        return None
    a = _bind(node, ["input", "dim", "index", "value"])
    x, dim, idx, value = a.get("input"), a.get("dim"), a.get("index"), a.get("value")
    if not (_tensor(x) and _tensor(idx) and isinstance(dim, int) and isinstance(value, (int, float))):
        return None
    rank = len(shape_of(x) or ())
    if rank == 0 or len(shape_of(idx) or ()) > 1 or dtype_of(idx) not in INDEX_DTYPES:
        return None
    return _op("gather", "index_fill", [x, idx], dim=dim % rank, value=float(value))


def _index_select(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.index_select,), "index_select"):
        return None
    a = _bind(node, ["input", "dim", "index"])
    x, dim, idx = a.get("input"), a.get("dim"), a.get("index")
    if not (_tensor(x) and _tensor(idx) and isinstance(dim, int)) or dtype_of(idx) not in INDEX_DTYPES:
        return None
    rank = len(shape_of(x) or ())
    if rank == 0 or len(shape_of(idx) or ()) > 1:
        return None
    return _op("gather", "index_select", [x, idx], dim=dim % rank)


def _gather(node: torch.fx.Node) -> NormOp | None:
    if _is(node, (torch.gather,), "gather"):
        a = _bind(node, ["input", "dim", "index"])
        x, dim, idx = a.get("input"), a.get("dim"), a.get("index")
    elif _is(node, (torch.take_along_dim,), "take_along_dim"):
        a = _bind(node, ["input", "indices", "dim"])
        x, dim, idx = a.get("input"), a.get("dim"), a.get("indices")
    else:
        return None
    if not (_tensor(x) and _tensor(idx) and isinstance(dim, int)) or dtype_of(idx) not in INDEX_DTYPES:
        return None
    xs, ish = shape_of(x) or (), shape_of(idx) or ()
    if not xs or len(xs) != len(ish) or shape_of(node) != ish:
        return None  # take_along_dim's broadcasting: library
    return _op("gather", "gather", [x, idx], dim=dim % len(xs))


def _embedding(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (F.embedding,), None):
        return None
    a = _bind(node, ["input", "weight", "padding_idx", "max_norm"])
    x, w = a.get("input"), a.get("weight")
    if a.get("max_norm") is not None or not _tensor(x) or dtype_of(x) not in INDEX_DTYPES:
        return None
    if not (_tensor(w) and len(shape_of(w) or ()) == 2):
        return None
    return _op("gather", "embedding", [x, w])


def _pixel(node: torch.fx.Node) -> NormOp | None:
    for name, fn, key in (("pixel_shuffle", F.pixel_shuffle, "upscale_factor"),
                          ("pixel_unshuffle", F.pixel_unshuffle, "downscale_factor")):
        if _is(node, (fn,), None):
            a = _bind(node, ["input", key])
            x, r = a.get("input"), a.get(key)
            if _tensor(x) and len(shape_of(x) or ()) >= 3 and isinstance(r, int) and r > 0:
                return _op("gather", name, [x], r=r)
    return None


def _repeat_interleave(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.repeat_interleave,), "repeat_interleave"):
        return None
    a = _bind(node, ["input", "repeats", "dim"])
    x, reps, dim = a.get("input"), a.get("repeats"), a.get("dim")
    if not _tensor(x) or not isinstance(reps, int) or reps < 0 or a.get("output_size") is not None:
        return None
    rank = len(shape_of(x) or ())
    if dim is None:
        return _op("gather", "repeat_interleave", [x], repeats=reps, dim=None)
    if not isinstance(dim, int) or rank == 0:
        return None
    return _op("gather", "repeat_interleave", [x], repeats=reps, dim=dim % rank)


def _bucketize(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.bucketize,), None):
        return None
    a = _bind(node, ["input", "boundaries"])
    x, b = a.get("input"), a.get("boundaries")
    if not (_tensor(x) and _tensor(b)) or len(shape_of(b) or ()) != 1 or not shape_of(x):
        return None
    return _op("gather", "search", [x, b], right=bool(a.get("right", False)), rows=False)


def _searchsorted(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.searchsorted,), None):
        return None
    a = _bind(node, ["sorted_sequence", "input"])
    seq, x = a.get("sorted_sequence"), a.get("input", a.get("self"))
    if not (_tensor(seq) and _tensor(x)) or a.get("sorter") is not None or not shape_of(x):
        return None
    side = a.get("side")
    right = bool(a.get("right", False)) or side == "right"
    ss, xs = shape_of(seq) or (), shape_of(x) or ()
    if len(ss) == 1:
        return _op("gather", "search", [x, seq], right=right, rows=False)
    if len(ss) != len(xs) or ss[:-1] != xs[:-1]:
        return None
    return _op("gather", "search", [x, seq], right=right, rows=True)


_BAG_MODES = ("sum", "mean", "max")


def _bag_op(x: Any, weight: Any, offsets: Any, mode: str, psw: Any, last: bool, pad: Any) -> NormOp | None:
    if mode not in _BAG_MODES or dtype_of(x) not in INDEX_DTYPES or not isinstance(pad, (int, type(None))):
        return None
    rank = len(shape_of(x) or ())
    if rank == 2 and offsets is None:
        fixed = True
    elif rank == 1 and _tensor(offsets) and len(shape_of(offsets) or ()) == 1:
        fixed = False
    else:
        return None
    if psw is not None and (not _tensor(psw) or mode != "sum"):
        return None
    sources = [x, weight] + ([] if fixed else [offsets]) + ([psw] if psw is not None else [])
    return _op("bag", "embedding_bag", sources, mode=mode, fixed=fixed, weighted=psw is not None,
               include_last=last, padding_idx=pad)


def _embedding_bag(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (F.embedding_bag,), None):
        return None
    a = _bind(node, ["input", "weight", "offsets", "max_norm", "norm_type", "scale_grad_by_freq", "mode", "sparse",
                     "per_sample_weights", "include_last_offset", "padding_idx"])
    w = a.get("weight")
    if a.get("max_norm") is not None or not (_tensor(w) or isinstance(w, str)):
        return None
    pad = a.get("padding_idx")
    if isinstance(pad, int) and _tensor(w) and pad < 0:
        pad += (shape_of(w) or (0,))[0]
    return _bag_op(a.get("input"), w, a.get("offsets"), a.get("mode", "mean"), a.get("per_sample_weights"),
                   bool(a.get("include_last_offset", False)), pad)


def _segment_reduce(node: torch.fx.Node) -> NormOp | None:
    if not _is(node, (torch.segment_reduce, torch._segment_reduce), None):
        return None
    a = _bind(node, ["data", "reduce", "lengths", "indices", "offsets", "axis", "unsafe", "initial"])
    data, reduce = a.get("data"), a.get("reduce")
    lengths, offsets, initial = a.get("lengths"), a.get("offsets"), a.get("initial")
    if not _tensor(data) or reduce not in ("sum", "mean", "max", "min") or a.get("axis", 0) != 0:
        return None
    if a.get("indices") is not None or not shape_of(data) or not isinstance(initial, (int, float, type(None))):
        return None
    seg = lengths if lengths is not None else offsets
    if not _tensor(seg) or len(shape_of(seg) or ()) != 1 or dtype_of(seg) not in INDEX_DTYPES:
        return None
    return _op("bag", "segment_reduce", [data, seg], mode=reduce, lengths=lengths is not None,
               initial=None if initial is None else float(initial))


_SCATTER = {"index_add": (torch.index_add, ["input", "dim", "index", "source", "alpha"]),
            "index_copy": (torch.index_copy, ["input", "dim", "index", "source"]),
            "scatter_add": (torch.scatter_add, ["input", "dim", "index", "src"]),
            "scatter": (torch.scatter, ["input", "dim", "index", "src", "reduce"])}


def _scatter(node: torch.fx.Node) -> NormOp | None:
    name = next((n for n, (fn, _) in _SCATTER.items() if _is(node, (fn,), n)), None)
    if name is None:
        return None
    a = _bind(node, _SCATTER[name][1])
    x, dim, idx = a.get("input"), a.get("dim"), a.get("index")
    src = a.get("source", a.get("src", a.get("value")))
    if not (_tensor(x) and _tensor(idx) and isinstance(dim, int)) or dtype_of(idx) not in INDEX_DTYPES:
        return None
    rank = len(shape_of(x) or ())
    if rank == 0 or a.get("reduce") is not None:
        return None
    alpha = a.get("alpha", 1)
    if not isinstance(alpha, (int, float)):
        return None
    if name in ("index_add", "index_copy"):
        if not _tensor(src) or len(shape_of(idx) or ()) != 1 or len(shape_of(src) or ()) != rank:
            return None
    elif not (_tensor(src) or isinstance(src, (int, float))) or len(shape_of(idx) or ()) != rank:
        return None
    sources = [x, idx] + ([src] if _tensor(src) else [])
    scalar = None if _tensor(src) else float(src)  # type: ignore[arg-type]  # an int or float: checked above
    return _op("scatter", name, sources, dim=dim % rank, alpha=alpha, scalar=scalar)
