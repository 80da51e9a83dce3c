"""Normalisation: map the many spellings of one operator (torch.relu, F.relu,
x.relu(), nn.ReLU, operator.add, x.add_, ...) to one canonical op with bound arguments.

Lowering passes only ever see ``NormOp``; anything this table does not know stays a
library call (a fallback node) in the candidate.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx
import torch.nn as nn
import torch.nn.functional as F

from .fx_meta import dtype_of

# canonical name -> parameter names with defaults (a missing default means required).
_REQ = object()
SIGNATURES: dict[str, list[tuple[str, Any]]] = {
    # unary pointwise
    **{
        n: [("input", _REQ)]
        for n in (
            "relu", "relu6", "silu", "sigmoid", "tanh", "selu", "hardsigmoid", "hardswish",
            "mish", "softsign", "abs", "exp", "log", "sqrt", "rsqrt", "neg", "reciprocal",
            "sin", "cos", "square", "erf", "sign", "logsigmoid", "tanhshrink", "log1p",
            "expm1", "identity", "exp2", "log2", "floor", "ceil",
        )
    },
    "leaky_relu": [("input", _REQ), ("negative_slope", 0.01)],
    "gelu": [("input", _REQ), ("approximate", "none")],
    "softplus": [("input", _REQ), ("beta", 1.0), ("threshold", 20.0)],
    "elu": [("input", _REQ), ("alpha", 1.0)],
    "celu": [("input", _REQ), ("alpha", 1.0)],
    "hardtanh": [("input", _REQ), ("min_val", -1.0), ("max_val", 1.0)],
    "softshrink": [("input", _REQ), ("lambd", 0.5)],
    "hardshrink": [("input", _REQ), ("lambd", 0.5)],
    "threshold": [("input", _REQ), ("threshold", _REQ), ("value", _REQ)],
    "zeros_like": [("input", _REQ)],
    "masked_fill": [("input", _REQ), ("mask", _REQ), ("value", _REQ)],
    "ones_like": [("input", _REQ)],
    "full_like": [("input", _REQ), ("fill_value", _REQ)],
    # scans (reverse=True only arises from flip -> scan -> flip, see graph._scan_overrides)
    "cumsum": [("input", _REQ), ("dim", _REQ), ("reverse", False)],
    "gather": [("input", _REQ), ("dim", _REQ), ("index", _REQ), ("sparse_grad", False)],
    "cumprod": [("input", _REQ), ("dim", _REQ), ("reverse", False)],
    # binary / ternary pointwise
    "add": [("input", _REQ), ("other", _REQ), ("alpha", 1)],
    "sub": [("input", _REQ), ("other", _REQ), ("alpha", 1)],
    "rsub": [("input", _REQ), ("other", _REQ), ("alpha", 1)],
    "mul": [("input", _REQ), ("other", _REQ)],
    "div": [("input", _REQ), ("other", _REQ), ("rounding_mode", None)],
    "pow": [("input", _REQ), ("exponent", _REQ)],
    "maximum": [("input", _REQ), ("other", _REQ)],
    "minimum": [("input", _REQ), ("other", _REQ)],
    "where": [("condition", _REQ), ("input", _REQ), ("other", _REQ)],
    "clamp": [("input", _REQ), ("min", None), ("max", None)],
    "clamp_min": [("input", _REQ), ("min", _REQ)],
    "clamp_max": [("input", _REQ), ("max", _REQ)],
    **{n: [("input", _REQ), ("other", _REQ)] for n in ("gt", "lt", "ge", "le", "eq", "ne")},
    # reductions (dim=None means all dims)
    **{
        n: [("input", _REQ), ("dim", None), ("keepdim", False)]
        for n in ("sum", "mean", "amax", "amin", "prod", "max_dim", "min_dim", "argmax", "argmin", "logsumexp")
    },
    "var": [("input", _REQ), ("dim", None), ("unbiased", True), ("keepdim", False), ("correction", None)],
    "std": [("input", _REQ), ("dim", None), ("unbiased", True), ("keepdim", False), ("correction", None)],
    "norm": [("input", _REQ), ("p", "fro"), ("dim", None), ("keepdim", False)],
    "softmax": [("input", _REQ), ("dim", None)],
    "log_softmax": [("input", _REQ), ("dim", None)],
    "layer_norm": [("input", _REQ), ("normalized_shape", _REQ), ("weight", None), ("bias", None), ("eps", 1e-5)],
    "rms_norm": [("input", _REQ), ("normalized_shape", _REQ), ("weight", None), ("eps", None)],
    # matmul family
    "linear": [("input", _REQ), ("weight", _REQ), ("bias", None)],
    "matmul": [("input", _REQ), ("other", _REQ)],
    "addmm": [("input", _REQ), ("mat1", _REQ), ("mat2", _REQ), ("beta", 1), ("alpha", 1)],
}

POINTWISE_UNARY = {n for n, sig in SIGNATURES.items() if len(sig) >= 1 and n in (
    "relu", "relu6", "silu", "sigmoid", "tanh", "selu", "hardsigmoid", "hardswish", "mish", "softsign",
    "abs", "exp", "log", "sqrt", "rsqrt", "neg", "reciprocal", "sin", "cos", "square", "erf", "sign",
    "logsigmoid", "tanhshrink", "log1p", "expm1", "identity", "exp2", "log2", "floor", "ceil",
    "leaky_relu", "gelu", "softplus", "elu", "celu", "hardtanh", "softshrink", "hardshrink", "threshold",
    "zeros_like", "ones_like", "full_like", "masked_fill",
)}
POINTWISE = POINTWISE_UNARY | {
    "add", "sub", "rsub", "mul", "div", "pow", "maximum", "minimum", "where", "clamp", "clamp_min",
    "clamp_max", "gt", "lt", "ge", "le", "eq", "ne",
}
REDUCTIONS = {"sum", "mean", "amax", "amin", "prod", "max_dim", "min_dim", "argmax", "argmin", "logsumexp",
              "var", "std", "norm"}


@dataclass
class NormOp:
    """A canonical op: name, bound arguments (fx Nodes for tensors), in-place flag."""

    op: str
    args: dict[str, Any]
    inplace: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


_FUNCTION_ALIASES: dict[Callable[..., Any], str] = {
    operator.add: "add", operator.sub: "sub", operator.mul: "mul", operator.truediv: "div",
    operator.pow: "pow", operator.neg: "neg", operator.gt: "gt", operator.lt: "lt", operator.ge: "ge",
    operator.le: "le", operator.eq: "eq", operator.ne: "ne",
    operator.iadd: "add_", operator.isub: "sub_", operator.imul: "mul_", operator.itruediv: "div_",
    torch.add: "add", torch.sub: "sub", torch.subtract: "sub", torch.mul: "mul", torch.multiply: "mul",
    torch.div: "div", torch.divide: "div", torch.true_divide: "div", torch.pow: "pow", torch.rsub: "rsub",
    torch.maximum: "maximum", torch.minimum: "minimum", torch.where: "where", torch.clamp: "clamp",
    torch.clip: "clamp", torch.clamp_min: "clamp_min", torch.clamp_max: "clamp_max",
    torch.gt: "gt", torch.lt: "lt", torch.ge: "ge", torch.le: "le", torch.eq: "eq", torch.ne: "ne",
    torch.relu: "relu", torch.sigmoid: "sigmoid", torch.tanh: "tanh", torch.abs: "abs", torch.exp: "exp",
    torch.log: "log", torch.sqrt: "sqrt", torch.rsqrt: "rsqrt", torch.neg: "neg", torch.negative: "neg",
    torch.reciprocal: "reciprocal", torch.sin: "sin", torch.cos: "cos", torch.square: "square",
    torch.erf: "erf", torch.sign: "sign", torch.log1p: "log1p", torch.expm1: "expm1", torch.exp2: "exp2",
    torch.log2: "log2", torch.floor: "floor", torch.ceil: "ceil", torch.selu: "selu", torch.celu: "celu",
    torch.relu_: "relu_", torch.sigmoid_: "sigmoid_", torch.tanh_: "tanh_",
    torch.special.expit: "sigmoid", torch.special.erf: "erf",
    torch.masked_fill: "masked_fill", torch.zeros_like: "zeros_like", torch.ones_like: "ones_like",
    torch.full_like: "full_like",
    torch.cumsum: "cumsum", torch.cumprod: "cumprod", torch.gather: "gather",
    F.relu: "relu", F.relu6: "relu6", F.leaky_relu: "leaky_relu", F.gelu: "gelu", F.silu: "silu",
    F.sigmoid: "sigmoid", F.tanh: "tanh", F.softplus: "softplus", F.elu: "elu", F.selu: "selu",
    F.celu: "celu", F.hardtanh: "hardtanh", F.hardsigmoid: "hardsigmoid", F.hardswish: "hardswish",
    F.mish: "mish", F.softsign: "softsign", F.logsigmoid: "logsigmoid", F.tanhshrink: "tanhshrink",
    F.softshrink: "softshrink", F.hardshrink: "hardshrink", F.threshold: "threshold",
    torch.sum: "sum", torch.mean: "mean", torch.amax: "amax", torch.amin: "amin", torch.prod: "prod",
    torch.argmax: "argmax", torch.argmin: "argmin", torch.logsumexp: "logsumexp", torch.var: "var",
    torch.std: "std", torch.norm: "norm", torch.softmax: "softmax", torch.log_softmax: "log_softmax",
    F.softmax: "softmax", F.log_softmax: "log_softmax", F.layer_norm: "layer_norm",
    torch.max: "max", torch.min: "min",
    F.linear: "linear", torch.matmul: "matmul", torch.mm: "matmul", torch.bmm: "matmul",
    operator.matmul: "matmul", torch.addmm: "addmm",
}
if hasattr(F, "rms_norm"):
    _FUNCTION_ALIASES[F.rms_norm] = "rms_norm"

_METHOD_ALIASES: dict[str, str] = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "true_divide": "div", "pow": "pow",
    "relu": "relu", "sigmoid": "sigmoid", "tanh": "tanh", "abs": "abs", "exp": "exp", "log": "log",
    "sqrt": "sqrt", "rsqrt": "rsqrt", "neg": "neg", "reciprocal": "reciprocal", "sin": "sin", "cos": "cos",
    "square": "square", "erf": "erf", "sign": "sign", "log1p": "log1p", "expm1": "expm1", "exp2": "exp2",
    "log2": "log2", "floor": "floor", "ceil": "ceil", "clamp": "clamp", "clip": "clamp",
    "clamp_min": "clamp_min", "clamp_max": "clamp_max", "maximum": "maximum", "minimum": "minimum",
    "where": "where", "gt": "gt", "lt": "lt", "ge": "ge", "le": "le", "eq": "eq", "ne": "ne",
    "sum": "sum", "mean": "mean", "amax": "amax", "amin": "amin", "prod": "prod", "argmax": "argmax",
    "argmin": "argmin", "logsumexp": "logsumexp", "var": "var", "std": "std", "norm": "norm",
    "softmax": "softmax", "log_softmax": "log_softmax", "max": "max", "min": "min",
    "matmul": "matmul", "mm": "matmul", "bmm": "matmul", "cumsum": "cumsum", "cumprod": "cumprod",
    "gather": "gather", "masked_fill": "masked_fill",
}
# -- the long tail of pointwise math (emit/math_rules.py writes them) ---------------------------
_MATH_UNARY = (
    "atan", "asin", "acos", "sinh", "cosh", "tan", "asinh", "acosh", "atanh", "log10", "trunc", "frac",
    "deg2rad", "rad2deg", "signbit", "isnan", "isinf", "isposinf", "isneginf", "isfinite", "isreal",
    "logical_not", "sinc", "erfc", "entr", "ndtr", "lgamma", "digamma", "erfinv", "ndtri",
    "i0", "i0e", "i1", "i1e", "erfcx", "log_ndtr",
)
_MATH_BINARY = (
    "atan2", "copysign", "fmod", "remainder", "floor_divide", "fmax", "fmin", "logaddexp", "logaddexp2",
    "hypot", "xlogy", "xlog1py", "ldexp", "nextafter", "logical_and", "logical_or", "logical_xor",
)
SIGNATURES.update({n: [("input", _REQ)] for n in _MATH_UNARY})
SIGNATURES.update({n: [("input", _REQ), ("other", _REQ)] for n in _MATH_BINARY})
SIGNATURES.update({
    "round": [("input", _REQ), ("decimals", 0)],
    "nan_to_num": [("input", _REQ), ("nan", 0.0), ("posinf", None), ("neginf", None)],
    "logit": [("input", _REQ), ("eps", None)],
    "mvlgamma": [("input", _REQ), ("p", _REQ)],
    "polygamma": [("n", _REQ), ("input", _REQ)],
    "heaviside": [("input", _REQ), ("values", _REQ)],
    "isclose": [("input", _REQ), ("other", _REQ), ("rtol", 1e-05), ("atol", 1e-08), ("equal_nan", False)],
    "lerp": [("input", _REQ), ("end", _REQ), ("weight", _REQ)],
    "addcmul": [("input", _REQ), ("tensor1", _REQ), ("tensor2", _REQ), ("value", 1)],
    "addcdiv": [("input", _REQ), ("tensor1", _REQ), ("tensor2", _REQ), ("value", 1)],
})
POINTWISE_UNARY |= {*_MATH_UNARY, "round", "nan_to_num", "logit", "mvlgamma", "polygamma"}
POINTWISE |= POINTWISE_UNARY | {*_MATH_BINARY, "heaviside", "isclose", "lerp", "addcmul", "addcdiv"}
_MATH_FUNCTIONS: dict[str, tuple[Callable[..., Any], ...]] = {
    "atan": (torch.atan, torch.arctan), "asin": (torch.asin, torch.arcsin), "acos": (torch.acos, torch.arccos),
    "sinh": (torch.sinh,), "cosh": (torch.cosh,), "tan": (torch.tan,), "asinh": (torch.asinh, torch.arcsinh),
    "acosh": (torch.acosh, torch.arccosh), "atanh": (torch.atanh, torch.arctanh), "log10": (torch.log10,),
    "trunc": (torch.trunc, torch.fix), "frac": (torch.frac,), "deg2rad": (torch.deg2rad,),
    "rad2deg": (torch.rad2deg,), "signbit": (torch.signbit,), "isnan": (torch.isnan,), "isinf": (torch.isinf,),
    "isposinf": (torch.isposinf,), "isneginf": (torch.isneginf,), "isfinite": (torch.isfinite,),
    "isreal": (torch.isreal,), "logical_not": (torch.logical_not,), "sinc": (torch.sinc, torch.special.sinc),
    "erfc": (torch.erfc, torch.special.erfc), "entr": (torch.special.entr,), "ndtr": (torch.special.ndtr,),
    "round": (torch.round, torch.special.round), "nan_to_num": (torch.nan_to_num,),
    "logit": (torch.logit, torch.special.logit), "lgamma": (torch.lgamma, torch.special.gammaln),
    "digamma": (torch.digamma, torch.special.digamma, torch.special.psi),
    "erfinv": (torch.erfinv, torch.special.erfinv), "ndtri": (torch.special.ndtri,),
    "i0": (torch.i0, torch.special.i0, torch.special.modified_bessel_i0), "i0e": (torch.special.i0e,),
    "i1": (torch.special.i1, torch.special.modified_bessel_i1), "i1e": (torch.special.i1e,),
    "erfcx": (torch.special.erfcx,), "log_ndtr": (torch.special.log_ndtr,),
    "mvlgamma": (torch.mvlgamma, torch.special.multigammaln), "polygamma": (torch.polygamma, torch.special.polygamma),
    "atan2": (torch.atan2, torch.arctan2),
    "copysign": (torch.copysign,), "fmod": (torch.fmod,), "remainder": (torch.remainder, operator.mod),
    "floor_divide": (torch.floor_divide, operator.floordiv), "fmax": (torch.fmax,), "fmin": (torch.fmin,),
    "logaddexp": (torch.logaddexp,), "logaddexp2": (torch.logaddexp2,), "hypot": (torch.hypot,),
    "xlogy": (torch.xlogy, torch.special.xlogy), "xlog1py": (torch.special.xlog1py,), "ldexp": (torch.ldexp,),
    "nextafter": (torch.nextafter,), "logical_and": (torch.logical_and,), "logical_or": (torch.logical_or,),
    "logical_xor": (torch.logical_xor,), "heaviside": (torch.heaviside,), "isclose": (torch.isclose,),
    "lerp": (torch.lerp,), "addcmul": (torch.addcmul,), "addcdiv": (torch.addcdiv,),
    "identity": (torch.positive,), "sign": (torch.sgn,), "sigmoid": (torch.special.expit,),
    "expm1": (torch.special.expm1,), "exp2": (torch.special.exp2,), "log1p": (torch.special.log1p,),
}
for _name, _fns in _MATH_FUNCTIONS.items():
    _FUNCTION_ALIASES.update({fn: _name for fn in _fns})
    _METHOD_ALIASES.update({fn.__name__: _name for fn in _fns if hasattr(torch.Tensor, fn.__name__)})
_METHOD_ALIASES.update({"arctan": "atan", "arcsin": "asin", "arccos": "acos", "arcsinh": "asinh",
                        "arccosh": "acosh", "arctanh": "atanh", "arctan2": "atan2", "fix": "trunc",
                        "positive": "identity", "sgn": "sign", "__mod__": "remainder",
                        "__floordiv__": "floor_divide"})
# reductions of the long tail (plan/lower_reduction.py expands them): any / all (bool), the
# NaN-skipping sum and mean, count_nonzero (int64) and softmin
SIGNATURES.update({n: [("input", _REQ), ("dim", None), ("keepdim", False)]
                   for n in ("all", "any", "nansum", "nanmean")})
SIGNATURES["count_nonzero"] = [("input", _REQ), ("dim", None)]
SIGNATURES["softmin"] = [("input", _REQ), ("dim", None)]
SIGNATURES["logcumsumexp"] = [("input", _REQ), ("dim", _REQ)]
REDUCTIONS |= {"all", "any", "nansum", "nanmean", "count_nonzero"}
_LONG_TAIL_FNS: dict[str, tuple[Callable[..., Any], ...]] = {
    "all": (torch.all,), "any": (torch.any,), "nansum": (torch.nansum,), "nanmean": (torch.nanmean,),
    "count_nonzero": (torch.count_nonzero,), "softmin": (F.softmin,), "logcumsumexp": (torch.logcumsumexp,)}
for _name, _fns in _LONG_TAIL_FNS.items():
    _FUNCTION_ALIASES.update({fn: _name for fn in _fns})
    _METHOD_ALIASES.update({fn.__name__: _name for fn in _fns if hasattr(torch.Tensor, fn.__name__)})
# softmax / log_softmax / softmin with dtype=torch.float32 on fp32 input change nothing; with
# dtype=torch.float64 the evaluator holds the result to float64's precision, which the fp32
# row kernel does not reach (measured: 3e-8 against a budget of 1.4e-14): library
DTYPE_KW = frozenset({"softmax", "log_softmax", "softmin"})
# reflected operators: x.__rsub__(y) is y - x; the others swap their two operands
REFLECTED: dict[str, str] = {"__rsub__": "rsub", "__rdiv__": "div", "__rtruediv__": "div", "__rpow__": "pow",
                             "__rmod__": "remainder", "__rfloordiv__": "floor_divide"}
SWAPPED = frozenset(REFLECTED) - {"__rsub__"}
_METHOD_ALIASES.update(REFLECTED)
_FUNCTION_ALIASES.update({getattr(torch.Tensor, n): op for n, op in REFLECTED.items() if hasattr(torch.Tensor, n)})


# in-place method spellings: x.relu_(), x.add_(y), ...
for _name in list(_METHOD_ALIASES):
    _METHOD_ALIASES.setdefault(_name + "_", _METHOD_ALIASES[_name] + "_")


# Methods that only convert dtype (or device): the identity when the dtype is unchanged.
_CASTS = {"float", "double", "half", "bfloat16", "to", "type", "type_as"}


def device_move(node: torch.fx.Node) -> bool:
    """``t.to(x.device)`` (or a device literal) that keeps the dtype: a move, not arithmetic.
    A tensor the module keeps as a plain attribute (``self.hidden``) is not moved by
    ``model.to(device)``, so the call stays in the forward as written: a kernel reading the
    tensor where ``__init__`` made it would read host memory on a GPU."""
    if node.op != "call_method" or str(node.target) != "to" or not node.args:
        return False
    src = node.args[0]
    src_meta = src.meta.get("tensor_meta") if isinstance(src, torch.fx.Node) else None
    out_meta = node.meta.get("tensor_meta")
    if getattr(src_meta, "dtype", None) is None or getattr(src_meta, "dtype", None) != getattr(out_meta, "dtype", 0):
        return False

    def device(v: Any) -> bool:
        if isinstance(v, (torch.device, str)):
            return True
        return (isinstance(v, torch.fx.Node) and v.op == "call_function" and v.target is getattr
                and len(v.args) == 2 and v.args[1] == "device")

    return any(device(v) for v in [*node.args[1:], *node.kwargs.values()])


def _module_op(mod: nn.Module, node: torch.fx.Node) -> NormOp | None:
    x = node.args[0] if node.args else node.kwargs.get("input")
    t = node.target
    simple = {
        nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu", nn.Sigmoid: "sigmoid", nn.Tanh: "tanh",
        nn.SELU: "selu", nn.Hardsigmoid: "hardsigmoid", nn.Hardswish: "hardswish", nn.Mish: "mish",
        nn.Softsign: "softsign", nn.LogSigmoid: "logsigmoid", nn.Tanhshrink: "tanhshrink",
        nn.Identity: "identity",
    }
    inplace = bool(getattr(mod, "inplace", False))
    for cls, name in simple.items():
        if type(mod) is cls:
            return NormOp(name, {"input": x}, inplace=inplace)
    if isinstance(mod, nn.LeakyReLU):
        return NormOp("leaky_relu", {"input": x, "negative_slope": mod.negative_slope}, inplace=inplace)
    if isinstance(mod, nn.GELU):
        return NormOp("gelu", {"input": x, "approximate": mod.approximate})
    if isinstance(mod, nn.Softplus):
        return NormOp("softplus", {"input": x, "beta": mod.beta, "threshold": mod.threshold})
    if isinstance(mod, nn.ELU):
        return NormOp("elu", {"input": x, "alpha": mod.alpha}, inplace=inplace)
    if isinstance(mod, nn.CELU):
        return NormOp("celu", {"input": x, "alpha": mod.alpha}, inplace=inplace)
    if isinstance(mod, nn.Hardtanh):  # also ReLU6's base, handled above
        return NormOp("hardtanh", {"input": x, "min_val": mod.min_val, "max_val": mod.max_val}, inplace=inplace)
    if isinstance(mod, nn.Softshrink):
        return NormOp("softshrink", {"input": x, "lambd": mod.lambd})
    if isinstance(mod, nn.Hardshrink):
        return NormOp("hardshrink", {"input": x, "lambd": mod.lambd})
    if isinstance(mod, nn.Threshold):
        return NormOp("threshold", {"input": x, "threshold": mod.threshold, "value": mod.value}, inplace=inplace)
    if isinstance(mod, (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)):
        # Dropout is the identity only when it cannot drop anything: p == 0 or eval mode.
        # With p > 0 in training mode the reference is random: keep it a library call.
        if mod.p == 0 or not mod.training:
            return NormOp("identity", {"input": x})
        return None
    if isinstance(mod, nn.Softmax):
        return NormOp("softmax", {"input": x, "dim": mod.dim})
    if isinstance(mod, nn.LogSoftmax):
        return NormOp("log_softmax", {"input": x, "dim": mod.dim})
    if isinstance(mod, nn.Linear):
        w = _attr_node(node, f"{t}.weight")
        b = _attr_node(node, f"{t}.bias") if mod.bias is not None else None
        return NormOp("linear", {"input": x, "weight": w, "bias": b})
    if isinstance(mod, nn.LayerNorm) and mod.elementwise_affine in (True, False):
        lw = _attr_node(node, f"{t}.weight") if mod.weight is not None else None
        lb = _attr_node(node, f"{t}.bias") if getattr(mod, "bias", None) is not None else None
        return NormOp("layer_norm", {"input": x, "normalized_shape": tuple(mod.normalized_shape),
                                     "weight": lw, "bias": lb, "eps": mod.eps})
    return None


def _attr_node(node: torch.fx.Node, path: str) -> str:
    """Parameters of call_module nodes are referenced by their attribute path (a str
    marker resolved by codegen as ``self.<path>``)."""
    return "@" + path


def _bind(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    sig = SIGNATURES.get(op)
    if sig is None:
        return None
    bound: dict[str, Any] = {}
    names = [n for n, _ in sig]
    if len(args) > len(names):
        return None
    for name, value in zip(names, args, strict=False):
        bound[name] = value
    for k, v in kwargs.items():
        if k in ("inplace", "out", "dtype", "reverse") and k not in names:
            if k == "out" and v is not None:
                return None
            if k == "dtype" and v is not None:
                return None
            continue
        if k == "self":
            k = "input"
        if k not in names or k in bound:
            return None
        bound[k] = v
    for name, default in sig:
        if name not in bound:
            if default is _REQ:
                return None
            bound[name] = default
    return bound


def normalize(node: torch.fx.Node, gm: torch.fx.GraphModule) -> NormOp | None:
    """Canonicalise an fx node; None when it is not an op the lowering knows."""
    if node.op == "call_module":
        mod = gm.get_submodule(str(node.target))
        return _module_op(mod, node)
    if node.op == "call_function":
        name = _FUNCTION_ALIASES.get(node.target)  # type: ignore[arg-type]
        inplace_kw = bool(node.kwargs.get("inplace", False))
    elif node.op == "call_method":
        name = _METHOD_ALIASES.get(str(node.target))
        inplace_kw = False
    else:
        return None
    if name is None and node.op == "call_function" and node.target in (F.dropout, torch.dropout):
        # dropout draws random numbers unless it cannot drop anything
        p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p", 0.5)
        training = node.args[2] if len(node.args) > 2 else node.kwargs.get("training", True)
        if p == 0 or training is False:
            return NormOp("identity", {"input": node.args[0] if node.args else node.kwargs.get("input")})
        return None
    if name is None and node.op == "call_method" and str(node.target) in _CASTS and node.args:
        if device_move(node):
            return None  # glue (graph.is_glue): the forward keeps the move
        # a cast to the dtype the tensor already has (x.float() on fp32) changes nothing
        src = node.args[0]
        src_meta = src.meta.get("tensor_meta") if isinstance(src, torch.fx.Node) else None
        out_meta = node.meta.get("tensor_meta")
        if src_meta is not None and out_meta is not None and hasattr(src_meta, "dtype") and \
                hasattr(out_meta, "dtype") and src_meta.dtype == out_meta.dtype and \
                tuple(src_meta.shape) == tuple(out_meta.shape):
            return NormOp("identity", {"input": src})
        if src_meta is not None and out_meta is not None and getattr(out_meta, "dtype", None) == torch.float32 \
                and getattr(src_meta, "dtype", None) in (torch.int64, torch.int32) and \
                tuple(src_meta.shape) == tuple(out_meta.shape):
            # an index converted to fp32 (torch.masked.argmax returns its input's dtype): the
            # kernel's store converts it
            return NormOp("identity", {"input": src})
        return None
    if name is None:
        return None
    inplace = inplace_kw
    if name.endswith("_"):
        name, inplace = name[:-1], True
    args, kwargs = tuple(node.args), dict(node.kwargs)
    if getattr(node.target, "__name__", node.target) in SWAPPED and len(args) == 2:
        args = (args[1], args[0])  # x.__rdiv__(y) is y / x
    if name in ("max", "min"):
        # torch.max(x) / torch.max(x, dim) / torch.max(x, other)
        second = args[1] if len(args) > 1 else kwargs.get("other", kwargs.get("dim"))
        if second is None:
            name = "amax" if name == "max" else "amin"
        elif isinstance(second, torch.fx.Node) and "tensor_meta" in second.meta:
            name = "maximum" if name == "max" else "minimum"
        else:
            name = "max_dim" if name == "max" else "min_dim"
    if name in ("softmax", "log_softmax", "softmin") and "_stacklevel" in kwargs:
        kwargs.pop("_stacklevel")
    if name in ("softmax", "log_softmax", "softmin") and len(args) > 2:
        args = args[:2]
    if name in DTYPE_KW and kwargs.get("dtype") == torch.float32 and dtype_of(args[0]) == torch.float32:
        kwargs.pop("dtype")
    if name in ("var", "std") and len(args) > 1 and isinstance(args[1], bool):
        # torch.var(x, True): the unbiased overload, dim=None
        args, kwargs = args[:1], {**kwargs, "unbiased": args[1]}
    if name == "sum" and "dtype" in kwargs and kwargs["dtype"] is None:
        kwargs.pop("dtype")
    bound = _bind(name, args, kwargs)
    if bound is None:
        return None
    return NormOp(name, bound, inplace=inplace)
