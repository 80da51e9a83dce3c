"""Seeded generator of random small operator specs, written the way people write PyTorch.

``generate(seed)`` returns a KernelBench-style spec source (``Model``, ``get_inputs``,
``get_init_inputs``) built from a few random steps: pointwise chains (unary / binary ops,
scalars, clamps, where), reductions over any subset of dims with and without keepdim,
broadcasts against kept dims, biases and a second input, views / reshapes / permutes /
transposes, norms (layer / group / batch / instance, softmax / log_softmax, normalize),
linear / matmul, small convolutions. Shapes are odd (primes and 1s), dtypes fp32 mostly,
fp16 / bf16 sometimes (tolerances in ``TOLERANCES``). The same seed gives the same source.
Every generated spec is run once in-process (``validate``) so a case is a valid reference.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch

SIZES = (1, 2, 3, 5, 7, 11, 13, 17, 31, 37)
MAX_NUMEL = 3000  # the Triton interpreter runs every program in Python: keep tensors small
# dtype -> (atol, rtol): the reference rounds every op's result to the dtype, the candidate
# keeps fp32 registers across a fused chain and rounds once, so half types differ by a few
# ulps of the dtype per op (bf16 has 8 mantissa bits: 2^-8 ~ 0.004 per rounding)
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (6e-2, 6e-2),
}
UNARY = (
    "torch.relu({v})", "F.gelu({v})", "torch.sigmoid({v})", "torch.tanh({v})", "F.silu({v})",
    "F.leaky_relu({v}, 0.2)", "{v}.abs()", "-{v}", "torch.exp({v}.clamp(max=2.0))", "{v} * 0.5",
    "{v} + 1.25", "2.0 - {v}", "torch.clamp({v}, min=-0.5, max=0.75)", "F.hardtanh({v}, -0.3, 0.6)",
    "torch.where({v} > 0, {v}, 0.1 * {v})", "F.softplus({v})", "F.elu({v})", "torch.sqrt({v}.abs() + 1e-3)",
    "torch.rsqrt({v} * {v} + 1.0)", "F.mish({v})", "torch.sin({v})", "{v}.clamp_min(0.1)", "F.relu6({v} * 3.0)",
    "F.hardswish({v})", "torch.erf({v})", "{v}.square()",
)
BINARY = ("{a} + {b}", "{a} - {b}", "{a} * {b}", "torch.maximum({a}, {b})", "torch.minimum({a}, {b})",
          "{a} / ({b}.abs() + 1.0)", "torch.add({a}, {b}, alpha=0.5)", "torch.where({b} > 0, {a}, {b})")
VIEWS = ("unsqueeze", "squeeze", "flatten", "permute", "transpose", "view")
REDUCTIONS = ("sum", "mean", "amax", "amin", "prod", "var", "std", "logsumexp")


@dataclass
class FuzzCase:
    seed: int
    name: str
    source: str
    dtype: str
    steps: list[str] = field(default_factory=list)

    @property
    def tolerance(self) -> tuple[float, float]:
        return TOLERANCES[self.dtype]


@dataclass
class _Builder:
    rng: random.Random
    dtype: str
    init: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    init_args: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)
    made: dict[str, str] = field(default_factory=dict)  # input name -> how get_inputs makes it
    n: int = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def assign(self, expr: str) -> str:
        v = self.name("t")
        self.body.append(f"{v} = {expr}")
        return v

    def param(self, shape: tuple[int, ...]) -> str:
        p = self.name("p")
        spelled = ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "")
        self.init.append(f"self.{p} = nn.Parameter(torch.randn({spelled}))")
        return f"self.{p}"


def _shape(rng: random.Random, rank: int, cap: int = MAX_NUMEL) -> list[int]:
    dims = [rng.choice(SIZES) for _ in range(rank)]
    while math.prod(dims) > cap:
        k = max(range(rank), key=lambda i: dims[i])
        dims[k] = SIZES[max(0, SIZES.index(dims[k]) - 2)]
    return dims


def _broadcastable(rng: random.Random, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts against ``shape``: some dims 1, maybe fewer leading dims."""
    out = [s if rng.random() < 0.5 else 1 for s in shape]
    drop = rng.randrange(len(shape) + 1) if shape and rng.random() < 0.4 else 0
    out = out[drop:]
    return tuple(out)


def _dims_spelling(rng: random.Random, dims: list[int], rank: int, tuple_ok: bool = True) -> str:
    spelled = [d - rank if rng.random() < 0.3 else d for d in dims]
    if len(spelled) == 1 and (rng.random() < 0.6 or not tuple_ok):
        return str(spelled[0])
    return "(" + ", ".join(str(d) for d in spelled) + ("," if len(spelled) == 1 else "") + ")"


def _step_unary(b: _Builder, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    tpl = b.rng.choice(UNARY)
    if b.dtype != "float32" and tpl.startswith("torch.sin"):
        # sin of a half-precision sum is ill-conditioned: the reference's rounding of a sum near
        # 200 moves it by up to half an ulp (0.5), not a candidate error (case 394: 0.32 off)
        tpl = "torch.tanh({v})"
    b.steps.append("unary")
    return b.assign(tpl.format(v=v)), shape


def _fits(small: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether ``small`` broadcasts to exactly ``shape``."""
    if len(small) > len(shape):
        return False
    return all(a in (1, b) for a, b in zip(reversed(small), reversed(shape), strict=False))


def _operand(b: _Builder, shape: tuple[int, ...], others: list[tuple[str, tuple[int, ...]]]) -> str:
    """A broadcasting partner of a value of ``shape``: a parameter, an input or an earlier value."""
    fits = [o for o, s in others if _fits(s, shape)]
    if fits and b.rng.random() < 0.5:
        return b.rng.choice(fits)
    if b.rng.random() < 0.15:
        return repr(round(b.rng.uniform(-2, 2), 3))
    return b.param(_broadcastable(b.rng, shape) or (1,))


def _step_binary(b: _Builder, v: str, shape: tuple[int, ...],
                 others: list[tuple[str, tuple[int, ...]]]) -> tuple[str, tuple[int, ...]]:
    o = _operand(b, shape, others)
    a, c = (v, o) if b.rng.random() < 0.7 else (o, v)
    tpl = b.rng.choice(BINARY)
    if o[0].isdigit() or o[0] == "-":
        tpl = b.rng.choice(BINARY[:5])
        if tpl.startswith("torch.m"):  # maximum / minimum take tensors only
            tpl = "{a} * {b}"
    b.steps.append("binary")
    return b.assign(tpl.format(a=a, b=c)), shape


def _step_reduce(b: _Builder, v: str, shape: tuple[int, ...],
                 others: list[tuple[str, tuple[int, ...]]]) -> tuple[str, tuple[int, ...]]:
    rng, rank = b.rng, len(shape)
    k = rng.randint(1, rank)
    dims = sorted(rng.sample(range(rank), k))
    red_numel = math.prod(shape[d] for d in dims)
    kinds = [r for r in REDUCTIONS if not (r == "prod" and (red_numel > 12 or k > 1))]  # torch.prod: one dim
    if b.dtype != "float32":
        kinds = [r for r in kinds if r not in ("prod", "var", "std")]
    kind = rng.choice(kinds)
    keep = rng.random() < 0.5
    ds = _dims_spelling(rng, dims, rank, tuple_ok=kind != "prod")
    extra = ""
    if kind in ("var", "std"):
        extra = ", unbiased=False" if red_numel == 1 or rng.random() < 0.5 else ""
    kd = ", keepdim=True" if keep else ""
    if kind == "logsumexp":
        expr = f"torch.logsumexp({v}, dim={ds}{kd})"
    elif rng.random() < 0.5:
        expr = f"{v}.{kind}(dim={ds}{extra}{kd})"
    else:
        expr = f"torch.{kind}({v}, dim={ds}{extra}{kd})"
    out_shape = tuple(1 if d in dims else s for d, s in enumerate(shape)) if keep else \
        tuple(s for d, s in enumerate(shape) if d not in dims)
    b.steps.append(f"{kind}{'_keep' if keep else ''}")
    r = b.assign(expr)
    if keep and rng.random() < 0.6:  # combine the kept reduction with the full value or a bias
        if rng.random() < 0.5:
            tpl = rng.choice(("{a} - {b}", "{a} * {b}", "{a} / ({b}.abs() + 1.0)", "{b} + {a}"))
            b.steps.append("broadcast_back")
            return b.assign(tpl.format(a=v, b=r)), shape
        bias = b.param(_broadcastable(rng, out_shape) or (1,))
        b.steps.append("kept_plus_bias")
        return b.assign(f"{r} + {bias}"), out_shape
    return r, out_shape


def _step_view(b: _Builder, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    rng, rank = b.rng, len(shape)
    choices = ["unsqueeze"]
    if rank >= 2:
        choices += ["flatten", "permute", "transpose", "view"]
    if 1 in shape:
        choices.append("squeeze")
    kind = rng.choice(choices)
    b.steps.append(kind)
    if kind == "unsqueeze":
        d = rng.randrange(rank + 1)
        return b.assign(f"{v}.unsqueeze({d})"), shape[:d] + (1,) + shape[d:]
    if kind == "squeeze":
        d = rng.choice([i for i, s in enumerate(shape) if s == 1])
        return b.assign(f"{v}.squeeze({d})"), shape[:d] + shape[d + 1:]
    if kind == "flatten":
        a = rng.randrange(rank - 1)
        return b.assign(f"{v}.flatten({a}, {a + 1})"), shape[:a] + (shape[a] * shape[a + 1],) + shape[a + 2:]
    if kind == "permute":
        perm = list(range(rank))
        rng.shuffle(perm)
        return b.assign(f"{v}.permute({', '.join(map(str, perm))})"), tuple(shape[p] for p in perm)
    if kind == "transpose":
        a, c = sorted(rng.sample(range(rank), 2))
        out = list(shape)
        out[a], out[c] = out[c], out[a]
        spelled = f"{v}.transpose({a}, {c})" if rng.random() < 0.7 else f"torch.transpose({v}, {a - rank}, {c})"
        return b.assign(spelled), tuple(out)
    # view: keep the leading dim, merge the rest (spelled from the runtime shape)
    spelled = rng.choice((f"{v}.reshape({v}.shape[0], -1)", f"{v}.contiguous().view({v}.size(0), -1)"))
    return b.assign(spelled), (shape[0], math.prod(shape[1:]))


def _step_norm(b: _Builder, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    rng, rank = b.rng, len(shape)
    kinds = ["softmax", "log_softmax", "layer_norm", "normalize"]
    if b.dtype == "float32":
        if rank >= 2 and shape[1] > 1:
            kinds += ["group_norm", "batch_norm"]
        if 3 <= rank <= 5 and math.prod(shape[2:]) > 1:
            kinds.append("instance_norm")
    kind = rng.choice(kinds)
    b.steps.append(kind)
    d = rng.randrange(rank)
    if kind in ("softmax", "log_softmax"):
        spelled = rng.choice((f"F.{kind}({v}, dim={d})", f"torch.{kind}({v}, {d - rank})", f"{v}.{kind}(dim={d})"))
        return b.assign(spelled), shape
    if kind == "normalize":
        return b.assign(f"F.normalize({v}, p=2.0, dim={d})"), shape
    if kind == "layer_norm":
        k = rng.randint(1, min(rank, 3))
        norm_shape = list(shape[rank - k:])
        if math.prod(norm_shape) == 1:
            return _step_unary(b, v, shape)
        m = b.name("ln")
        affine = rng.random() < 0.7
        b.init.append(f"self.{m} = nn.LayerNorm({norm_shape}, elementwise_affine={affine})")
        return b.assign(f"self.{m}({v})"), shape
    c = shape[1]
    m = b.name("norm")
    if kind == "group_norm":
        g = rng.choice([k for k in range(1, c + 1) if c % k == 0])
        if c // g * math.prod(shape[2:]) == 1:  # one value per group: torch refuses it
            return _step_unary(b, v, shape)
        b.init.append(f"self.{m} = nn.GroupNorm({g}, {c})")
    elif kind == "batch_norm":
        if math.prod(shape) // c == 1:  # batch statistics need more than one value per channel
            return _step_unary(b, v, shape)
        nd = {2: 1, 3: 1, 4: 2, 5: 3}.get(rank)
        if nd is None:
            return _step_unary(b, v, shape)
        b.init.append(f"self.{m} = nn.BatchNorm{nd}d({c})")
    else:
        nd = rank - 2
        affine = rng.random() < 0.5
        b.init.append(f"self.{m} = nn.InstanceNorm{nd}d({c}, affine={affine})")
    return b.assign(f"self.{m}({v})"), shape


def _step_matmul(b: _Builder, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    rng, rank = b.rng, len(shape)
    k_out = rng.choice((1, 3, 5, 7, 13, 17))
    kinds = ["linear", "weight"] + (["self_product"] if rank >= 2 else [])
    kind = rng.choice(kinds)
    b.steps.append(kind)
    if kind == "linear":
        m = b.name("fc")
        bias = rng.random() < 0.7
        b.init.append(f"self.{m} = nn.Linear({shape[-1]}, {k_out}, bias={bias})")
        return b.assign(f"self.{m}({v})"), shape[:-1] + (k_out,)
    if kind == "weight":
        w = b.param((shape[-1], k_out))
        spelled = rng.choice((f"{v} @ {w}", f"torch.matmul({v}, {w})"))
        return b.assign(spelled), shape[:-1] + (k_out,)
    return b.assign(f"torch.matmul({v}, {v}.transpose(-2, -1))"), shape[:-1] + (shape[-2],)


def _step_conv(b: _Builder, v: str, shape: tuple[int, ...]) -> tuple[str, tuple[int, ...]]:
    rng, rank = b.rng, len(shape)
    c, k_out = shape[1], rng.choice((2, 3, 5))
    m = b.name("conv")
    if rank == 3:
        b.steps.append("conv1d")
        b.init.append(f"self.{m} = nn.Conv1d({c}, {k_out}, 3, padding=1)")
        return b.assign(f"self.{m}({v})"), (shape[0], k_out, shape[2])
    if rng.random() < 0.5:
        b.steps.append("conv2d")
        b.init.append(f"self.{m} = nn.Conv2d({c}, {k_out}, 3, padding=1)")
        return b.assign(f"self.{m}({v})"), (shape[0], k_out, shape[2], shape[3])
    b.steps.append("conv_transpose2d")
    b.init.append(f"self.{m} = nn.ConvTranspose2d({c}, {k_out}, 3, stride=2, padding=1)")
    return b.assign(f"self.{m}({v})"), (shape[0], k_out, 2 * shape[2] - 1, 2 * shape[3] - 1)


def _step_cross_entropy(b: _Builder, v: str, shape: tuple[int, ...],
                        inputs: list[tuple[str, tuple[int, ...]]]) -> tuple[str, tuple[int, ...]]:
    """The logits so far into a cross-entropy against class indices, with random options."""
    rng, (n, c) = b.rng, shape
    inputs.append(("target", (n,)))
    b.made["target"] = f"torch.randint(0, {c}, ({n},))"
    opts = []
    if rng.random() < 0.5:
        w = b.name("cw")
        b.init.append(f'self.register_buffer("{w}", torch.rand({c}) + 0.5)')
        opts.append(f"weight=self.{w}")
    if rng.random() < 0.5:
        opts.append(f"label_smoothing={rng.choice((0.1, 0.3))}")
    if rng.random() < 0.5:
        opts.append(f"ignore_index={rng.randrange(c)}")
    reduction = rng.choice(("mean", "sum", "none"))
    opts.append(f'reduction="{reduction}"')
    b.steps.append("cross_entropy")
    out = b.assign(f"F.cross_entropy({v}, target, {', '.join(opts)})")
    return out, ((n,) if reduction == "none" else ())


def generate(seed: int) -> FuzzCase:
    """The spec of case ``seed`` (the same source for the same seed)."""
    rng = random.Random(seed)
    dtype = rng.choices(("float32", "float16", "bfloat16"), weights=(8, 1, 1))[0]
    b = _Builder(rng, dtype)
    rank = rng.choices((1, 2, 3, 4, 5), weights=(1, 3, 3, 3, 2))[0]
    x_shape = tuple(_shape(rng, rank))
    inputs = [("x", x_shape)]
    if rng.random() < 0.3:
        inputs.append(("y", _broadcastable(rng, x_shape) or (1,)))
    others: list[tuple[str, tuple[int, ...]]] = list(inputs[1:])
    v, shape = "x", x_shape
    for _ in range(rng.randint(2, 7)):
        if not shape:  # a scalar: only pointwise steps are left
            v, shape = _step_unary(b, v, shape)
            continue
        # the Triton interpreter computes tl.dot of bf16 operands wrongly (a 16x16x16 dot of
        # randn values off by 2.8e10, fp16 exact): bf16 cases draw no matmul or conv
        kind = rng.choices(("unary", "binary", "reduce", "view", "norm", "matmul", "conv"),
                           weights=(4, 4, 4, 2, 2, 0 if dtype == "bfloat16" else 1,
                                    1 if dtype == "float32" and len(shape) in (3, 4) else 0))[0]
        before = (v, shape)
        if kind == "unary":
            v, shape = _step_unary(b, v, shape)
        elif kind == "binary":
            v, shape = _step_binary(b, v, shape, others)
        elif kind == "reduce":
            v, shape = _step_reduce(b, v, shape, others)
        elif kind == "view":
            v, shape = _step_view(b, v, shape)
        elif kind == "norm":
            v, shape = _step_norm(b, v, shape)
        elif kind == "matmul":
            v, shape = _step_matmul(b, v, shape)
        else:
            v, shape = _step_conv(b, v, shape)
        if math.prod(shape) > 4 * MAX_NUMEL:  # a matmul / conv grew it: shrink back
            v, shape = b.assign(f"{v}.mean(dim=-1)"), shape[:-1]
        others.append(before)
    if all(s in VIEWS for s in b.steps):  # views only: nothing to compute, make it compute
        v, shape = _step_unary(b, v, shape)
    if dtype == "float32" and len(shape) == 2 and shape[1] > 1 and rng.random() < 0.3:
        v, shape = _step_cross_entropy(b, v, shape, inputs)
    name = f"fuzz_{seed}"
    cast = {"float16": ".to(torch.float16)", "bfloat16": ".to(torch.bfloat16)"}.get(dtype, "")
    base = _source(name, b, inputs, v, [])
    extra = [] if b.made else [sets for sets in _extra_inputs(rng, inputs, cast) if _runs(base, sets)]
    return FuzzCase(seed, name, _source(name, b, inputs, v, extra), dtype, b.steps)


def _randn(shape: tuple[int, ...], cast: str) -> str:
    return f"torch.randn({', '.join(map(str, shape))}){cast}"


def _extra_inputs(rng: random.Random, inputs: list[tuple[str, tuple[int, ...]]], cast: str) -> list[str]:
    """Candidate extra input sets (each kept only if the reference runs on it): another
    extent of x's first dim (y's too where it has that extent), shapes the example did not
    have; and in half the cases a non-contiguous x of the same shape (a permuted tensor),
    strides the example did not have."""
    (_, xs), rest = inputs[0], inputs[1:]
    sets = []
    other = rng.choice([s for s in SIZES if s != xs[0] and s * math.prod(xs[1:]) <= MAX_NUMEL] or [xs[0]])
    if other != xs[0]:
        resized = [_randn((other,) + xs[1:], cast)]
        resized += [_randn((other,) + s[1:] if len(s) == len(xs) and s[0] == xs[0] else s, cast) for _, s in rest]
        sets.append(", ".join(resized))
    if len(xs) >= 2 and rng.random() < 0.5:
        rev = ", ".join(str(d) for d in reversed(range(len(xs))))
        sets.append(", ".join([f"{_randn(tuple(reversed(xs)), cast)}.permute({rev})"]
                              + [_randn(s, cast) for _, s in rest]))
    return sets


def _runs(source: str, inputs: str) -> bool:
    """Whether the reference of ``source`` runs on the input list ``inputs`` (spelled)."""
    scope: dict[str, object] = {}
    try:
        exec(compile(source, "<case>", "exec"), scope)  # noqa: S102 - our own generated source
        with torch.no_grad():
            scope["Model"]()(*eval(f"[{inputs}]", scope))  # type: ignore[operator]  # noqa: S307
    except Exception:  # noqa: BLE001 - a shape the reference refuses is just not used
        return False
    return True


def _source(name: str, b: _Builder, inputs: list[tuple[str, tuple[int, ...]]], out: str, extra: list[str]) -> str:
    dt = {"float16": "torch.float16", "bfloat16": "torch.bfloat16"}.get(b.dtype)
    lines = [f'"""Generated case {name}: {" -> ".join(b.steps)} ({b.dtype})."""', "",
             "import torch", "import torch.nn as nn", "import torch.nn.functional as F", ""]
    if dt:
        atol, rtol = TOLERANCES[b.dtype]
        lines += [f'KE_TOLERANCE = {{"atol": {atol}, "rtol": {rtol}}}', ""]
    lines += ["", "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += [f"        {line}" for line in b.init]
    if dt:
        lines.append(f"        self.to({dt})")
    args = ", ".join(n for n, _ in inputs)
    lines += ["", f"    def forward(self, {args}):"]
    lines += [f"        {line}" for line in b.body]
    lines += [f"        return {out}", "", ""]
    cast = f".to({dt})" if dt else ""
    made = ", ".join(b.made.get(n, _randn(s, cast)) for n, s in inputs)
    lines += ["def get_inputs():", f"    return [{made}]", "", "",
              "def get_init_inputs():", "    return []", ""]
    if extra:
        lines += ["", "def get_extra_inputs():", "    return ["]
        lines += [f"        [{sets}]," for sets in extra]
        lines += ["    ]", ""]
    return "\n".join(lines)


def validate(case: FuzzCase) -> str:
    """'' when the reference builds and runs on its inputs, else why not (a generator bug or
    an op the CPU reference lacks in half precision)."""
    scope: dict[str, object] = {}
    try:
        exec(compile(case.source, case.name, "exec"), scope)  # noqa: S102 - our own generated source
        model = scope["Model"]()  # type: ignore[operator]
        with torch.no_grad():
            out = model(*scope["get_inputs"]())  # type: ignore[operator]
    except Exception as exc:  # noqa: BLE001 - the reason is the answer
        return f"{type(exc).__name__}: {exc}"
    if not isinstance(out, torch.Tensor) or not out.is_floating_point():
        return "output is not a float tensor"
    return ""
