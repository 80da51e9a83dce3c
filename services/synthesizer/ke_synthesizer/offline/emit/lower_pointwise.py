"""Pointwise lowering: one canonical op -> one Triton expression over fp32 registers.

Every expression is written against already-loaded operand expressions (strings), so
the same emitter serves flat pointwise kernels, row (reduction) kernels and matmul
epilogues. Formulas follow torch's definitions (thresholds, defaults) so results match
within fp32 rounding.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..frontend.ops import NormOp

# Triton helpers emitted once per candidate when an expression needs them: Triton's
# core language has no tanh/log1p, so they are written in terms of exp/log.
HELPERS: dict[str, str] = {
    "_tanh": '''@triton.jit
def _tanh(x):
    # tanh via exp of a non-positive argument: no overflow for large |x|.
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x >= 0, y, -y)
''',
    "_softplus": '''@triton.jit
def _softplus(x):
    # log(1 + exp(x)) without overflow: max(x, 0) + log(1 + exp(-|x|)).
    return tl.maximum(x, 0.0) + tl.log(1.0 + tl.exp(-tl.abs(x)))
''',
}

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def literal(value: Any) -> str | None:
    """A Python scalar as Triton source; None when the value is not a plain scalar."""
    if isinstance(value, bool):
        return "1.0" if value else "0.0"
    if isinstance(value, (int, float)):
        v = float(value)
        if math.isnan(v):
            return 'float("nan")'
        if math.isinf(v):
            return 'float("inf")' if v > 0 else 'float("-inf")'
        return repr(v)
    return None


class PointwiseEmitter:
    """Turns NormOps into Triton expressions; records which helpers are needed."""

    def __init__(self) -> None:
        self.helpers: set[str] = set()

    def emit(self, op: NormOp, val: Callable[[Any], str]) -> str | None:
        a = op.args
        name = op.op
        x = val(a["input"]) if "input" in a and name != "where" else ""
        if name == "identity":
            return x
        if name == "masked_fill":
            return f"tl.where({val(a['mask'])}, {val(a['value'])}, {x})"
        if name == "zeros_like":
            return f"tl.zeros_like({x})"
        if name == "ones_like":
            return f"(tl.zeros_like({x}) + 1.0)"
        if name == "full_like":
            v = literal(a["fill_value"])
            return None if v is None else f"(tl.zeros_like({x}) + {v})"
        if name == "relu":
            return f"tl.maximum({x}, 0.0)"
        if name == "relu6":
            return f"tl.minimum(tl.maximum({x}, 0.0), 6.0)"
        if name == "leaky_relu":
            return f"tl.where({x} > 0, {x}, {x} * {literal(a['negative_slope'])})"
        if name == "gelu":
            if a["approximate"] == "tanh":
                self.helpers.add("_tanh")
                return (f"0.5 * {x} * (1.0 + _tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))")
            if a["approximate"] == "none":
                return f"0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"
            return None
        if name == "silu":
            return f"{x} * tl.sigmoid({x})"
        if name == "sigmoid":
            return f"tl.sigmoid({x})"
        if name == "tanh":
            self.helpers.add("_tanh")
            return f"_tanh({x})"
        if name == "softplus":
            beta, thr = literal(a["beta"]), literal(a["threshold"])
            if beta is None or thr is None:
                return None
            self.helpers.add("_softplus")
            return f"tl.where({x} * {beta} > {thr}, {x}, _softplus({x} * {beta}) / {beta})"
        if name == "elu":
            return f"tl.where({x} > 0, {x}, {literal(a['alpha'])} * (tl.exp({x}) - 1.0))"
        if name == "celu":
            al = literal(a["alpha"])
            return f"tl.where({x} > 0, {x}, {al} * (tl.exp({x} / {al}) - 1.0))"
        if name == "selu":
            return f"{SELU_SCALE!r} * tl.where({x} > 0, {x}, {SELU_ALPHA!r} * (tl.exp({x}) - 1.0))"
        if name == "hardtanh":
            return f"tl.minimum(tl.maximum({x}, {literal(a['min_val'])}), {literal(a['max_val'])})"
        if name == "hardsigmoid":
            return f"tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0"
        if name == "hardswish":
            return f"{x} * tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0"
        if name == "mish":
            self.helpers.update(("_tanh", "_softplus"))
            return f"{x} * _tanh(tl.where({x} > 20.0, {x}, _softplus({x})))"
        if name == "softsign":
            return f"{x} / (1.0 + tl.abs({x}))"
        if name == "logsigmoid":
            return f"tl.minimum({x}, 0.0) - tl.log(1.0 + tl.exp(-tl.abs({x})))"
        if name == "tanhshrink":
            self.helpers.add("_tanh")
            return f"{x} - _tanh({x})"
        if name == "softshrink":
            lam = literal(a["lambd"])
            return f"tl.where({x} > {lam}, {x} - {lam}, tl.where({x} < -{lam}, {x} + {lam}, 0.0))"
        if name == "hardshrink":
            lam = literal(a["lambd"])
            return f"tl.where(tl.abs({x}) > {lam}, {x}, 0.0)"
        if name == "threshold":
            return f"tl.where({x} > {literal(a['threshold'])}, {x}, {literal(a['value'])})"
        simple = {
            "abs": "tl.abs({})", "exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt({})",
            "rsqrt": "tl.rsqrt({})", "neg": "-({})", "reciprocal": "1.0 / ({})", "sin": "tl.sin({})",
            "cos": "tl.cos({})", "erf": "tl.erf({})", "exp2": "tl.exp2({})", "log2": "tl.log2({})",
            "floor": "tl.floor({})", "ceil": "tl.ceil({})", "log1p": "tl.log(1.0 + ({}))",
            "expm1": "(tl.exp({}) - 1.0)",
        }
        if name in simple:
            return simple[name].format(x)
        if name == "square":
            return f"({x} * {x})"
        if name == "sign":
            return f"tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0))"
        if name in ("add", "sub", "rsub"):
            y = val(a["other"])
            alpha = a["alpha"]
            if alpha != 1:
                y = f"({y} * {literal(alpha)})"
            if name == "add":
                return f"({x} + {y})"
            if name == "sub":
                return f"({x} - {y})"
            return f"({y} - {x})" if alpha == 1 else f"({val(a['other'])} - {x} * {literal(alpha)})"
        if name == "mul":
            return f"({x} * {val(a['other'])})"
        if name == "div":
            if a["rounding_mode"] is not None:
                return None
            return f"({x} / {val(a['other'])})"
        if name == "pow":
            return self._pow(a, val)
        if name in ("maximum", "minimum"):
            return f"tl.{name}({x}, {val(a['other'])})"
        if name == "where":
            return f"tl.where({val(a['condition'])}, {val(a['input'])}, {val(a['other'])})"
        if name in ("clamp", "clamp_min", "clamp_max"):
            lo = a.get("min") if name != "clamp_max" else None
            hi = a.get("max") if name != "clamp_min" else None
            out = x
            if lo is not None:
                out = f"tl.maximum({out}, {val(lo)})"
            if hi is not None:
                out = f"tl.minimum({out}, {val(hi)})"
            return out
        cmp = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}
        if name in cmp:
            return f"({x} {cmp[name]} {val(a['other'])})"
        return None

    def _pow(self, a: dict[str, Any], val: Callable[[Any], str]) -> str | None:
        base, exp = a["input"], a["exponent"]
        exp_lit = literal(exp) if not isinstance(exp, bool) else None
        base_lit = literal(base) if not isinstance(base, bool) else None
        if exp_lit is not None and base_lit is None:
            e = float(exp)
            x = val(base)
            if e == int(e) and abs(e) <= 4:
                n = int(abs(e))
                prod = " * ".join([x] * n) if n else "1.0"
                return f"({prod})" if e >= 0 else f"(1.0 / ({prod}))"
            if e == int(e):
                # integer power of a possibly negative base: magnitude via exp/log, sign by parity
                mag = f"tl.exp({exp_lit} * tl.log(tl.abs({x})))"
                return f"tl.where({x} < 0, -{mag}, {mag})" if int(e) % 2 else mag
            if e == 0.5:
                return f"tl.sqrt({x})"
            if e == -0.5:
                return f"tl.rsqrt({x})"
            return f"tl.exp({exp_lit} * tl.log({x}))"
        if base_lit is not None and exp_lit is None and float(base) > 0:
            return f"tl.exp({val(exp)} * {math.log(float(base))!r})"
        return None  # tensor ** tensor: left to the library (sign rules of pow)
