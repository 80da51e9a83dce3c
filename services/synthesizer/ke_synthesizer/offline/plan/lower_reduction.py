"""Reductions and row-wise composites (softmax, norms, variance, ...): analysis of the
reduced dims and expansion into micro-ops that the row kernel generator schedules.

A row group views its full shape F as [M, N]: the kept dims (in order) flattened into
M rows and the reduced dims D into N columns. Values in the group are either *full*
(one per element, shape F) or *row* (one per row: shape F with D set to 1 = ``row``,
or with D removed = ``rowflat``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ..frontend.fx_meta import dtype_of, shape_of
from ..frontend.ops import NormOp

FULL_OUTPUT = {"softmax", "log_softmax", "layer_norm", "rms_norm", "cumsum", "cumprod", "cummax", "cummin",
               "softmin", "logcumsumexp"}
# cummax / cummin: the values of torch.cummax / cummin (overrides.cummax_overrides)
SCANS = {"cumsum", "cumprod", "cummax", "cummin"}
ROW_OUTPUT = {"gather", "sum", "mean", "amax", "amin", "prod", "argmax", "argmin", "logsumexp", "var", "std", "norm",
              # the long tail: bool any / all, NaN-skipping sum and mean, an int64 count
              "all", "any", "nansum", "nanmean", "count_nonzero"}
ROW_OPS = FULL_OUTPUT | ROW_OUTPUT
FP32_EPS = 1.1920928955078125e-07  # torch.finfo(torch.float32).eps: rms_norm's default eps


@dataclass(frozen=True)
class RowInfo:
    full: tuple[int, ...]
    dims: tuple[int, ...]
    layout: str  # layout of the op's output: full / row / rowflat

    @property
    def keep_shape(self) -> tuple[int, ...]:
        return tuple(1 if i in self.dims else s for i, s in enumerate(self.full))

    @property
    def flat_shape(self) -> tuple[int, ...]:
        return tuple(s for i, s in enumerate(self.full) if i not in self.dims)

    def layout_of(self, shape: tuple[int, ...] | None) -> str | None:
        if shape == self.full:
            return "full"
        if shape == self.keep_shape:
            return "row"
        if shape == self.flat_shape:
            return "rowflat"
        return None


def _norm_dims(dim: Any, rank: int) -> tuple[int, ...] | None:
    if dim is None:
        return tuple(range(rank))
    if isinstance(dim, int) and not isinstance(dim, bool):
        dims = [dim]
    elif isinstance(dim, (list, tuple)) and all(isinstance(d, int) for d in dim):
        dims = list(dim)
    else:
        return None
    if rank == 0:
        return None
    out = sorted({d % rank for d in dims})
    return tuple(out) if out else tuple(range(rank))


def _shape_length(ns: Any) -> int | None:
    """How many trailing dims a normalized_shape covers. Only the count matters (torch
    checks the values); a run-time ``x.shape[-k:]`` slice is recognised too."""
    if isinstance(ns, int):
        return 1
    if isinstance(ns, (list, tuple)):
        return len(ns)
    if isinstance(ns, torch.fx.Node) and ns.op == "call_function" and ns.target is operator.getitem:
        base, idx = ns.args
        is_shape = isinstance(base, torch.fx.Node) and (
            (base.op == "call_function" and base.target is getattr and base.args[1] == "shape")
            or (base.op == "call_method" and base.target == "size" and len(base.args) == 1))
        if is_shape and isinstance(idx, slice) and idx.stop is None and idx.step is None \
                and isinstance(idx.start, int) and idx.start < 0:
            return -idx.start
    return None


# count_nonzero counts in the fp32 accumulator: exact up to 2^24 elements a row, past that
# a count of ones rounds
COUNT_EXACT = 1 << 24


def row_info(node: torch.fx.Node, op: NormOp, param_shape: Callable[[str], tuple[int, ...]]) -> RowInfo | None:
    """The [M, N] view of a reduction/composite node, or None when it cannot be lowered."""
    if op.op not in ROW_OPS:
        return None
    x = op.args.get("input")
    if isinstance(x, str) and x.startswith("@"):
        full = param_shape(x[1:])
    elif isinstance(x, torch.fx.Node) and shape_of(x) is not None:
        full = shape_of(x) or ()
        if dtype_of(x) not in (None,) and not dtype_of(x).is_floating_point and not (  # type: ignore[union-attr]
                dtype_of(x) == torch.bool and op.op in ("all", "any", "count_nonzero")):
            return None
    else:
        return None
    rank = len(full)
    if op.op in ("layer_norm", "rms_norm"):
        ns = op.args["normalized_shape"]
        k = _shape_length(ns)
        if k is None or not 0 < k <= rank:
            return None
        dims: tuple[int, ...] | None = tuple(range(rank - k, rank))
    elif op.op == "gather":
        # one element per row picked along dim by an index holding one entry per row
        idx = op.args["index"]
        d = op.args["dim"]
        if not isinstance(d, int) or not isinstance(idx, torch.fx.Node) or rank == 0:
            return None
        dims = (d % rank,)
        keep = tuple(1 if i in dims else s for i, s in enumerate(full))
        if shape_of(idx) != keep or shape_of(node) != keep or dtype_of(idx) not in (torch.int64, torch.int32):
            return None
    elif op.op in ("softmax", "log_softmax", "softmin", "logcumsumexp") or op.op in SCANS:
        if op.args["dim"] is None or not isinstance(op.args["dim"], int):
            return None
        dims = _norm_dims(op.args["dim"], rank)
    else:
        dims = _norm_dims(op.args.get("dim"), rank)
        if rank == 0:
            dims = ()
    if dims is None or (not dims and rank):
        return None
    if op.op == "norm" and op.args["p"] not in ("fro", 1, 2, 1.0, 2.0, math.inf, -math.inf):
        if not isinstance(op.args["p"], (int, float)) or op.args["p"] <= 0:
            return None
    if op.op in ("argmax", "argmin") and op.args.get("dim") is None and op.args.get("keepdim"):
        return None
    if op.op in ("var", "std") and op.args.get("correction") is not None:
        if not isinstance(op.args["correction"], (int, float)):
            return None
    if op.op == "count_nonzero" and math.prod(full[d] for d in dims) > COUNT_EXACT:
        return None
    info = RowInfo(tuple(full), dims, "full")
    if op.op in FULL_OUTPUT:
        return info
    layout = info.layout_of(shape_of(node))
    if layout is None or layout == "full" and info.keep_shape != info.full:
        return None
    if layout == "full":
        # reduced dims of extent 1 in the example (`x.sum(0, keepdim=True)` of a batch of
        # one): the output is still one value per row, and sized so on other shapes
        layout = "row"
    return RowInfo(tuple(full), dims, layout)


@dataclass
class Micro:
    """One SSA step of a row kernel."""

    name: str
    layout: str  # full | row
    expr: str = ""  # pointwise expression (over other micro names)
    reduce: str = ""  # sum | max | min | prod | argmax | argmin
    src: str = ""  # reduced full value
    load: int = -1  # operand index for loads
    index: str = ""  # per-row column index (gather)
    deps: list[str] = field(default_factory=list)


def expand_composite(op: NormOp, out: str, x: str, extra: dict[str, str], new: Callable[[str], str]) -> list[Micro]:
    """Micro-ops of one reduction/composite op; ``x`` is the full input value,
    ``extra`` names external operands (weight, bias) already loaded, ``new`` makes temps.
    The number of reduced elements is the kernel argument ``N``."""
    name = op.op
    ms: list[Micro] = []

    def full(expr: str, deps: list[str], nm: str | None = None) -> str:
        nm = nm or new("f")
        ms.append(Micro(nm, "full", expr=expr, deps=deps))
        return nm

    def row(expr: str, deps: list[str], nm: str | None = None) -> str:
        nm = nm or new("r")
        ms.append(Micro(nm, "row", expr=expr, deps=deps))
        return nm

    def red(kind: str, src: str, nm: str | None = None) -> str:
        nm = nm or new("r")
        ms.append(Micro(nm, "row", reduce=kind, src=src, deps=[src]))
        return nm

    if name == "gather":
        idx = extra["index"]
        ms.append(Micro(out, "row", reduce="pick", src=x, deps=[x, idx], index=idx))
    elif name in SCANS:
        kind = name + ("_rev" if op.args.get("reverse") else "")
        ms.append(Micro(out, "full", reduce=kind, src=x, deps=[x]))
    elif name == "sum":
        red("sum", x, out)
    elif name == "mean":
        s = red("sum", x)
        row(f"{s} / N", [s], out)
    elif name in ("amax", "amin", "prod", "argmax", "argmin"):
        red({"amax": "max", "amin": "min"}.get(name, name), x, out)
    elif name in ("var", "std"):
        corr = op.args.get("correction")
        if corr is None:
            corr = 1 if op.args.get("unbiased", True) else 0
        s = red("sum", x)
        mu = row(f"{s} / N", [s])
        d = full(f"{x} - {mu}", [x, mu])
        q = full(f"{d} * {d}", [d])
        ss = red("sum", q)
        v_expr = f"{ss} / tl.maximum(N - {float(corr)!r}, 0.0)"
        if name == "var":
            row(v_expr, [ss], out)
        else:
            v = row(v_expr, [ss])
            row(f"tl.sqrt({v})", [v], out)
    elif name == "norm":
        p = op.args["p"]
        if p in ("fro", 2, 2.0):
            q = full(f"{x} * {x}", [x])
            s = red("sum", q)
            row(f"tl.sqrt({s})", [s], out)
        elif p in (1, 1.0):
            a = full(f"tl.abs({x})", [x])
            red("sum", a, out)
        elif p == float("inf"):
            a = full(f"tl.abs({x})", [x])
            red("max", a, out)
        elif p == float("-inf"):
            a = full(f"tl.abs({x})", [x])
            red("min", a, out)
        else:
            pf = float(p)
            a = full(f"tl.exp({pf!r} * tl.log(tl.abs({x})))", [x])
            s = red("sum", a)
            row(f"tl.exp(tl.log({s}) / {pf!r})", [s], out)
    elif name in ("logsumexp", "softmax", "log_softmax"):
        m = red("max", x)
        # a row of -inf would give nan in x - m; torch returns -inf / nan likewise
        e = full(f"tl.exp({x} - {m})", [x, m])
        s = red("sum", e)
        if name == "logsumexp":
            row(f"tl.log({s}) + {m}", [s, m], out)
        elif name == "softmax":
            full(f"{e} / {s}", [e, s], out)
        else:
            full(f"({x} - {m}) - tl.log({s})", [x, m, s], out)
    elif name == "layer_norm":
        s = red("sum", x)
        mu = row(f"{s} / N", [s])
        d = full(f"{x} - {mu}", [x, mu])
        q = full(f"{d} * {d}", [d])
        ss = red("sum", q)
        rstd = row(f"tl.rsqrt({ss} / N + {float(op.args['eps'])!r})", [ss])
        y = full(f"{d} * {rstd}", [d, rstd])
        if "weight" in extra:
            y = full(f"{y} * {extra['weight']}", [y, extra["weight"]])
        if "bias" in extra:
            y = full(f"{y} + {extra['bias']}", [y, extra["bias"]])
        full(y, [y], out)
    elif name == "rms_norm":
        eps = op.args.get("eps")
        eps = FP32_EPS if eps is None else float(eps)
        q = full(f"{x} * {x}", [x])
        s = red("sum", q)
        r = row(f"tl.rsqrt({s} / N + {eps!r})", [s])
        y = full(f"{x} * {r}", [x, r])
        if "weight" in extra:
            y = full(f"{y} * {extra['weight']}", [y, extra["weight"]])
        full(y, [y], out)
    elif name in ("all", "any"):
        nz = full(f"tl.where({x} != 0, 1.0, 0.0)", [x])
        r = red("min" if name == "all" else "max", nz)
        row(f"{r} != 0", [r], out)
    elif name == "count_nonzero":
        nz = full(f"tl.where({x} != 0, 1.0, 0.0)", [x])
        red("sum", nz, out)
    elif name in ("nansum", "nanmean"):
        z = full(f"tl.where({x} != {x}, 0.0, {x})", [x])
        if name == "nansum":
            red("sum", z, out)
        else:
            s = red("sum", z)
            c = red("sum", full(f"tl.where({x} != {x}, 0.0, 1.0)", [x]))
            row(f"{s} / {c}", [s, c], out)
    elif name == "logcumsumexp":
        # m + log(cumsum(exp(x - m))) with m the row's max: no exp overflows; a row whose max is
        # -inf is -inf throughout, as torch's
        m = red("max", x)
        e = full(f"tl.exp({x} - {m})", [x, m])
        c = new("f")
        ms.append(Micro(c, "full", reduce="cumsum", src=e, deps=[e]))
        full(f"tl.where({m} == float(\"-inf\"), {m}, tl.log({c}) + {m})", [c, m], out)
    elif name == "softmin":
        # softmax of -x: the row's min leads
        m = red("min", x)
        e = full(f"tl.exp({m} - {x})", [x, m])
        s = red("sum", e)
        full(f"{e} / {s}", [e, s], out)
    else:  # pragma: no cover - row_info filters ops
        raise LoweringError(f"no expansion for {name}")
    return ms
