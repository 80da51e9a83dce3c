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
from .math_rules import MATH_HELPERS, MATH_RULES, literal

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


class PointwiseEmitter:
    """Turns NormOps into Triton expressions; records which helpers are needed."""

    def __init__(self) -> None:
        self.helpers: set[str] = set()

    def emit(self, op: NormOp, val: Callable[[Any], str]) -> str | None:
        a = op.args
        name = op.op
        # the input's expression first, for every op: kernels number their operands in the
        # order ``val`` first sees them
        x = val(a["input"]) if "input" in a and name != "where" else ""
        rule = RULES.get(name)
        return None if rule is None else rule(self, a, x, val)

    def needs(self, expr: str, *helpers: str) -> str:
        """``expr``, recording the Triton helpers (``HELPERS``) it calls."""
        self.helpers.update(helpers)
        return expr

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


# How one canonical op is written: (emitter, the op's bound arguments, the input's
# expression, operand -> expression) -> a Triton expression, or None where this use of the
# op stays a library call. ``RULES`` maps every op the pointwise emitter knows to its rule.
Rule = Callable[[PointwiseEmitter, dict[str, Any], str, Callable[[Any], str]], "str | None"]


def _full_like(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    v = literal(a["fill_value"])
    return None if v is None else f"(tl.zeros_like({x}) + {v})"


def _gelu(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    if a["approximate"] == "tanh":
        return em.needs(f"0.5 * {x} * (1.0 + _tanh(0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})))",
                        "_tanh")
    if a["approximate"] == "none":
        return f"0.5 * {x} * (1.0 + tl.erf({x} * 0.7071067811865476))"
    return None


def _softplus(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    beta, thr = literal(a["beta"]), literal(a["threshold"])
    if beta is None or thr is None:
        return None
    return em.needs(f"tl.where({x} * {beta} > {thr}, {x}, _softplus({x} * {beta}) / {beta})", "_softplus")


def _celu(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    al = literal(a["alpha"])
    return f"tl.where({x} > 0, {x}, {al} * (tl.exp({x} / {al}) - 1.0))"


def _softshrink(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    lam = literal(a["lambd"])
    return f"tl.where({x} > {lam}, {x} - {lam}, tl.where({x} < -{lam}, {x} + {lam}, 0.0))"


def _hardshrink(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    lam = literal(a["lambd"])
    return f"tl.where(tl.abs({x}) > {lam}, {x}, 0.0)"


def _simple(template: str) -> Rule:
    """A function of the input alone, ``template`` with ``{}`` for it."""
    return lambda em, a, x, val: template.format(x)


def _additive(name: str) -> Rule:
    """add, sub, rsub with their ``alpha``."""

    def rule(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
        y = val(a["other"])
        alpha = a["alpha"]
        if alpha != 1:
            y = f"({y} * {literal(alpha)})"
        if name == "add":
            return f"({x} + {y})"
        if name == "sub":
            return f"({x} - {y})"
        return f"({y} - {x})" if alpha == 1 else f"({val(a['other'])} - {x} * {literal(alpha)})"

    return rule


def _div(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    if a["rounding_mode"] is not None:
        return None
    return f"({x} / {val(a['other'])})"


def _extremum(name: str) -> Rule:
    """maximum / minimum of two operands."""
    return lambda em, a, x, val: f"tl.{name}({x}, {val(a['other'])})"


def _clamp(name: str) -> Rule:
    """clamp, clamp_min, clamp_max (bounds are scalars or operands)."""

    def rule(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
        lo = a.get("min") if name != "clamp_max" else None
        hi = a.get("max") if name != "clamp_min" else None
        out = x
        if lo is not None:
            out = f"tl.maximum({out}, {val(lo)})"
        if hi is not None:
            out = f"tl.minimum({out}, {val(hi)})"
        return out

    return rule


def _compare(symbol: str) -> Rule:
    return lambda em, a, x, val: f"({x} {symbol} {val(a['other'])})"


SIMPLE = {
    "abs": "tl.abs({})", "exp": "tl.exp({})", "log": "tl.log({})", "sqrt": "tl.sqrt({})",
    "rsqrt": "tl.rsqrt({})", "neg": "-({})", "reciprocal": "1.0 / ({})", "sin": "tl.sin({})",
    "cos": "tl.cos({})", "erf": "tl.erf({})", "exp2": "tl.exp2({})", "log2": "tl.log2({})",
    "floor": "tl.floor({})", "ceil": "tl.ceil({})", "log1p": "tl.log(1.0 + ({}))",
    "expm1": "(tl.exp({}) - 1.0)",
}
COMPARISONS = {"gt": ">", "lt": "<", "ge": ">=", "le": "<=", "eq": "==", "ne": "!="}

RULES: dict[str, Rule] = {
    "identity": lambda em, a, x, val: x,
    "masked_fill": lambda em, a, x, val: f"tl.where({val(a['mask'])}, {val(a['value'])}, {x})",
    "zeros_like": lambda em, a, x, val: f"tl.zeros_like({x})",
    "ones_like": lambda em, a, x, val: f"(tl.zeros_like({x}) + 1.0)",
    "full_like": _full_like,
    "relu": lambda em, a, x, val: f"tl.maximum({x}, 0.0)",
    "relu6": lambda em, a, x, val: f"tl.minimum(tl.maximum({x}, 0.0), 6.0)",
    "leaky_relu": lambda em, a, x, val: f"tl.where({x} > 0, {x}, {x} * {literal(a['negative_slope'])})",
    "gelu": _gelu,
    "silu": lambda em, a, x, val: f"{x} * tl.sigmoid({x})",
    "sigmoid": lambda em, a, x, val: f"tl.sigmoid({x})",
    "tanh": lambda em, a, x, val: em.needs(f"_tanh({x})", "_tanh"),
    "softplus": _softplus,
    "elu": lambda em, a, x, val: f"tl.where({x} > 0, {x}, {literal(a['alpha'])} * (tl.exp({x}) - 1.0))",
    "celu": _celu,
    "selu": lambda em, a, x, val: f"{SELU_SCALE!r} * tl.where({x} > 0, {x}, {SELU_ALPHA!r} * (tl.exp({x}) - 1.0))",
    "hardtanh": lambda em, a, x, val: (f"tl.minimum(tl.maximum({x}, {literal(a['min_val'])}), "
                                       f"{literal(a['max_val'])})"),
    "hardsigmoid": lambda em, a, x, val: f"tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0",
    "hardswish": lambda em, a, x, val: f"{x} * tl.minimum(tl.maximum({x} + 3.0, 0.0), 6.0) / 6.0",
    "mish": lambda em, a, x, val: em.needs(f"{x} * _tanh(tl.where({x} > 20.0, {x}, _softplus({x})))",
                                           "_tanh", "_softplus"),
    "softsign": lambda em, a, x, val: f"{x} / (1.0 + tl.abs({x}))",
    "logsigmoid": lambda em, a, x, val: f"tl.minimum({x}, 0.0) - tl.log(1.0 + tl.exp(-tl.abs({x})))",
    "tanhshrink": lambda em, a, x, val: em.needs(f"{x} - _tanh({x})", "_tanh"),
    "softshrink": _softshrink,
    "hardshrink": _hardshrink,
    "threshold": lambda em, a, x, val: f"tl.where({x} > {literal(a['threshold'])}, {x}, {literal(a['value'])})",
    **{op: _simple(template) for op, template in SIMPLE.items()},
    "square": lambda em, a, x, val: f"({x} * {x})",
    "sign": lambda em, a, x, val: f"tl.where({x} > 0, 1.0, tl.where({x} < 0, -1.0, 0.0))",
    **{op: _additive(op) for op in ("add", "sub", "rsub")},
    "mul": lambda em, a, x, val: f"({x} * {val(a['other'])})",
    "div": _div,
    "pow": lambda em, a, x, val: em._pow(a, val),
    **{op: _extremum(op) for op in ("maximum", "minimum")},
    "where": lambda em, a, x, val: f"tl.where({val(a['condition'])}, {val(a['input'])}, {val(a['other'])})",
    **{op: _clamp(op) for op in ("clamp", "clamp_min", "clamp_max")},
    **{op: _compare(symbol) for op, symbol in COMPARISONS.items()},
}


# -- the long tail of pointwise math (emit/math_rules.py) ------------------------------------------
HELPERS.update(MATH_HELPERS)
RULES.update({k: v for k, v in MATH_RULES.items() if k not in ("div_rounding", "pow_tensor")})


def _div_any(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    """``div`` with its rounding modes (``trunc``, ``floor``)."""
    return _div(em, a, x, val) if a["rounding_mode"] is None else MATH_RULES["div_rounding"](em, a, x, val)


def _pow_any(em: PointwiseEmitter, a: dict[str, Any], x: str, val: Callable[[Any], str]) -> str | None:
    """``pow`` of a tensor base and a tensor exponent too (C pow's sign and special cases);
    a scalar side becomes a tensor of the other's shape (the helper works on tensors)."""
    plain = em._pow(a, val)
    if plain is not None:
        return plain
    base, exp = a["input"], a["exponent"]
    b, e = val(base), val(exp)
    if literal(base) is not None:
        b = f"(tl.zeros_like({e}) + {b})"
    if literal(exp) is not None:
        e = f"(tl.zeros_like({b}) + {e})"
    return em.needs(f"_pow({b}, {e})", "_pow", "_signbit")


RULES["div"] = _div_any
RULES["pow"] = _pow_any
