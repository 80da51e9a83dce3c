"""RowBuilder: the micro-ops of one row group (loads, pointwise expressions, expanded
reductions) that the row bodies, launcher and split kernels render; see kernel_row."""

from __future__ import annotations

import functools
import re
from typing import Any

import torch
import torch.fx

from kernelevolve.errors import LoweringError

from ...emit.lower_pointwise import PointwiseEmitter, literal
from ...frontend.fx_meta import shape_of
from ...plan.lower_reduction import ROW_OPS, Micro, RowInfo, expand_composite
from ...plan.plan import Group, Plan
from .row_layout import Operand, classify, make_layout


class RowBuilder:
    def __init__(self, plan: Plan, group: Group, emitter: PointwiseEmitter) -> None:
        self.plan, self.group, self.emitter = plan, group, emitter
        self.rinfo: RowInfo = group.info["row"]
        self.layouts: dict[torch.fx.Node, str] = group.info["layouts"]
        self.lay = make_layout(self.rinfo)
        self.operands: list[Operand] = []
        self._keys: list[tuple[Any, str]] = []
        self.scalars: list[torch.fx.Node] = []
        self.micros: list[Micro] = []
        self.helpers: set[str] = set()
        self._tmp = 0

    def new(self, prefix: str) -> str:
        self._tmp += 1
        return f"{prefix}{self._tmp}"

    def load(self, v: Any, layout: str) -> str:
        key = (v, layout)
        if key not in self._keys:
            op = classify(self.plan.spec, self.lay, self.rinfo, v, layout)
            self._keys.append(key)
            self.operands.append(op)
            i = len(self.operands) - 1
            # per-row operands are loaded once per row block, outside column loops
            ml = "full" if layout == "full" and op.cls in ("full", "col", "strided") else "row"
            self.micros.append(Micro(f"a{i}", ml, load=i))
        return f"a{self._keys.index(key)}"

    def value(self, v: Any, layout: str) -> str:
        if isinstance(v, torch.fx.Node) and self.plan.group_of.get(v) is self.group:
            return f"v_{v.name}"
        if isinstance(v, str) or (isinstance(v, torch.fx.Node) and shape_of(v) is not None):
            return self.load(v, layout)
        if isinstance(v, torch.fx.Node):
            if v not in self.scalars:
                self.scalars.append(v)
            return f"s{self.scalars.index(v)}"
        lit = literal(v)
        if lit is None:
            raise LoweringError(f"unsupported operand {v!r}")
        return lit

    def _value_at(self, layout: str, v: Any) -> str:
        return self.value(v, layout)

    def build(self) -> None:
        for m in self.group.members:
            op = self.group.ops[m]
            layout = self.layouts[m]
            if layout == "total":  # each block's share of the scalar sum / mean (atomic store)
                v = self.value(op.args["input"], "row")
                self.micros.append(Micro(f"v_{m.name}", "row", expr=v if op.op == "sum" else f"{v} / M", deps=[v]))
                continue
            if op.op in ROW_OPS:
                x = self.value(op.args["input"], "full")
                extra = {k: self.value(op.args[k], "full") for k in ("weight", "bias") if op.args.get(k) is not None}
                if op.op == "gather":
                    extra["index"] = self.value(op.args["index"], "row")
                self.micros += expand_composite(op, f"v_{m.name}", x, extra, self.new)
                continue
            expr = self.emitter.emit(op, functools.partial(self._value_at, layout))
            if expr is None:
                raise LoweringError(f"cannot emit {op.op}")
            known = {mi.name for mi in self.micros}
            deps = [t for t in re.findall(r"\b[a-z]\w*\b", expr) if t in known]
            self.micros.append(Micro(f"v_{m.name}", "full" if layout == "full" else "row", expr=expr, deps=deps))
        self._cse()

    def _cse(self) -> None:
        """Drop repeated micro-ops (mean and var of the same input both sum it)."""
        alias: dict[str, str] = {}
        seen: dict[tuple, str] = {}
        out: list[Micro] = []

        def sub(text: str) -> str:
            if not alias or not text:
                return text
            return re.sub(r"\b[a-z]\w*\b", lambda t: alias.get(t.group(0), t.group(0)), text)

        for mi in self.micros:
            mi.expr, mi.src, mi.index = sub(mi.expr), sub(mi.src), sub(mi.index)
            mi.deps = [alias.get(d, d) for d in mi.deps]
            key = (mi.layout, mi.expr, mi.reduce, mi.src, mi.load, mi.index)
            canon = seen.get(key) if mi.load < 0 else None
            if canon is None:
                seen[key] = mi.name
                out.append(mi)
            elif mi.name.startswith("v_"):  # a group value: keep its name as an alias
                out.append(Micro(mi.name, mi.layout, expr=canon, deps=[canon]))
            else:
                alias[mi.name] = canon
        self.micros = out

    def closure(self, roots: list[str]) -> list[Micro]:
        """Full-size micro-ops needed for ``roots`` (per-row values are computed once)."""
        by_name = {mi.name: mi for mi in self.micros}
        need: set[str] = set()
        stack = list(roots)
        while stack:
            n = stack.pop()
            mi = by_name.get(n)
            if mi is None or mi.layout != "full" or n in need:
                continue
            need.add(n)
            stack += mi.deps
        return [mi for mi in self.micros if mi.name in need]
