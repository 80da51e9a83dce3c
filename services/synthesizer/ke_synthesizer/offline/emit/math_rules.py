"""Pointwise math of the long tail: inverse trigonometric and hyperbolic functions,
rounding, classification (``isnan``, ``signbit``, ...), integer-style division and
modulo, ``atan2``, ``pow`` of two tensors, ``logaddexp``, ``hypot``, ``nextafter``, ...

Negation is written ``x * -1.0``: Triton lowers ``-x`` to ``0 - x``, which turns -0.0
into +0.0. Written with ``tl`` primitives only (``exp``, ``log``, ``sqrt``, ``sin``, ``cos``,
``floor``, ``fma``, bit casts) rather than ``libdevice``: Triton's interpreter runs
``tl.math`` but not ``libdevice`` (every ``libdevice`` call returns None there, measured
with triton 3.7), and a candidate must run on both. Each formula follows the reference's
definition of the special values (NaN in, NaN out; signed zeros; ``fmod`` taking the
dividend's sign and ``remainder`` the divisor's; ``floor_divide`` as ATen's
``div_floor_floating``).

``MATH_RULES`` joins the pointwise emitter's ``RULES`` and ``MATH_HELPERS`` its
``HELPERS`` (``lower_pointwise``); a rule has the same signature as the rules there.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Protocol


class Emitter(Protocol):
    def needs(self, expr: str, *helpers: str) -> str: ...


Val = Callable[[Any], str]
Rule = Callable[[Emitter, dict[str, Any], str, Val], "str | None"]

MATH_HELPERS: dict[str, str] = {
    "_signbit": '''@triton.jit
def _signbit(x):
    # the sign bit itself: true for -0.0 and negative NaNs, as torch.signbit
    return x.to(tl.int32, bitcast=True) < 0
''',
    "_atan": '''@triton.jit
def _atan(x):
    # Cephes atanf: reduce |x| to [0, tan(pi/8)] around 0, pi/4 or pi/2, then an odd
    # polynomial (relative error ~1e-7); atan(+-inf) = +-pi/2, NaN stays NaN, -0 stays -0
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = (a > 0.41421356237309503) & (a <= 2.414213562373095)
    t = tl.where(big, -1.0 / a, tl.where(mid, (a - 1.0) / (a + 1.0), a))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    z = t * t
    p = (((8.05374449538e-2 * z - 1.38776856032e-1) * z + 1.99777106478e-1) * z - 3.33329491539e-1) * z * t + t
    r = base + p
    return tl.where(x == 0, x, tl.where(x < 0, r * -1.0, r))
''',
    "_atan2": '''@triton.jit
def _atan2(y, x):
    # the angle of (|x|, |y|) in [0, pi/2], then reflected by the signs (sign bits: atan2(0, -0) = pi)
    ay = tl.abs(y)
    ax = tl.abs(x)
    a = _atan(ay / ax)
    a = tl.where((ay == float("inf")) & (ax == float("inf")), 0.7853981633974483, a)
    a = tl.where((ay == 0) & (ax == 0), 0.0, a)
    a = tl.where(_signbit(x), 3.141592653589793 - a, a)
    a = tl.where(_signbit(y), a * -1.0, a)
    return tl.where((x != x) | (y != y), x + y, a)
''',
    "_sinh": '''@triton.jit
def _sinh(x):
    # a series near 0 (exp(x) - exp(-x) cancels there), e^|x| / 2 as exp(|x| - ln 2) past 9
    # (exp(|x|) alone overflows before sinh does)
    a = tl.abs(x)
    z = x * x
    small = x * (1.0 + z * (1.6666666666666666e-1 + z * (8.333333333333333e-3 + z * 1.984126984126984e-4)))
    mid = 0.5 * (tl.exp(a) - tl.exp(-a))
    big = tl.exp(a - 0.6931471805599453)
    r = tl.where(a < 0.5, tl.abs(small), tl.where(a < 9.0, mid, big))
    return tl.where(x == 0, x, tl.where(x < 0, r * -1.0, r))
''',
    "_cosh": '''@triton.jit
def _cosh(x):
    a = tl.abs(x)
    return tl.where(a < 9.0, 0.5 * (tl.exp(a) + tl.exp(-a)), tl.exp(a - 0.6931471805599453))
''',
    "_asinh": '''@triton.jit
def _asinh(x):
    # log(|x| + sqrt(x^2 + 1)), log(2|x|) where x^2 would overflow, the odd series near 0
    a = tl.abs(x)
    mid = tl.log(a + tl.sqrt(a * a + 1.0))
    big = tl.log(a) + 0.6931471805599453
    small = a * (1.0 - a * a * (1.6666666666666666e-1 - a * a * 7.5e-2))
    r = tl.where(a < 0.01, small, tl.where(a > 1.0e4, big, mid))
    return tl.where(x == 0, x, tl.where(x < 0, r * -1.0, r))
''',
    "_acosh": '''@triton.jit
def _acosh(x):
    r = tl.where(x > 1.0e4, tl.log(x) + 0.6931471805599453, tl.log(x + tl.sqrt((x - 1.0) * (x + 1.0))))
    return tl.where(x < 1.0, float("nan"), r)
''',
    "_atanh": '''@triton.jit
def _atanh(x):
    a = tl.abs(x)
    small = a * (1.0 + a * a * (3.3333333333333333e-1 + a * a * 2.0e-1))
    r = tl.where(a < 0.01, small, 0.5 * tl.log((1.0 + a) / (1.0 - a)))
    r = tl.where(a > 1.0, float("nan"), r)
    return tl.where(x == 0, x, tl.where(x < 0, r * -1.0, r))
''',
    "_rint": '''@triton.jit
def _rint(x):
    # round half to even: adding and subtracting 1.5 * 2^23 rounds to an integer in fp32's
    # own round-to-nearest-even; past 2^22 every float is an integer already (and inf, NaN
    # pass through); a zero result keeps the input's sign, as torch.round
    r = (x + 12582912.0) - 12582912.0
    r = tl.where(tl.abs(x) < 4194304.0, r, x)
    return tl.where(r == 0, x * 0.0, r)
''',
    "_trunc": '''@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
''',
    "_fmod": '''@triton.jit
def _fmod(x, y):
    # C fmod: x - trunc(x / y) * y, the result has x's sign and |r| < |y|; the quotient's
    # rounding can be one off, corrected once; fmod(x, 0) and fmod(inf, y) are NaN. Exact
    # while |x / y| < 2^24 (the quotient an fp32 integer); past that the result can be off
    # by a multiple of y (an exact reduction would scale y by powers of two in a loop)
    q = x / y
    n = tl.where(q < 0, tl.ceil(q), tl.floor(q))
    r = tl.fma(-n, y, x)
    ay = tl.abs(y)
    sy = tl.where(x < 0, ay * -1.0, ay)
    r = tl.where((r != 0) & ((r < 0) != (x < 0)), r + sy, r)
    r = tl.where(tl.abs(r) >= ay, r - sy, r)
    r = tl.where(ay == float("inf"), x, r)
    r = tl.where((ay == 0) | (tl.abs(x) == float("inf")), float("nan"), r)
    return tl.where(r == 0, x * 0.0, r)
''',
    "_remainder": '''@triton.jit
def _remainder(x, y):
    # Python's modulo (ATen's remainder for floats): fmod, moved to the divisor's sign
    m = _fmod(x, y)
    return tl.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)
''',
    "_floor_divide": '''@triton.jit
def _floor_divide(x, y):
    # ATen's div_floor_floating: (x - fmod(x, y)) / y, one less when the remainder and the
    # divisor differ in sign, floored (rounded where it lands within half of the next integer)
    m = _fmod(x, y)
    d = (x - m) / y
    d = tl.where((m != 0) & ((y < 0) != (m < 0)), d - 1.0, d)
    f = tl.floor(d)
    f = tl.where(d - f > 0.5, f + 1.0, f)
    q = x / y
    f = tl.where(d == 0, q * 0.0, f)
    return tl.where(y == 0, q, f)
''',
    "_pow": '''@triton.jit
def _pow(x, y):
    # C pow over two tensors: |x|^y as exp2(y * log2|x|), the sign of a negative base by the
    # parity of an integer exponent (NaN for a fractional one), pow(x, 0) = pow(1, y) = 1,
    # pow(-1, +-inf) = 1, a zero base keeping its sign for odd exponents
    ax = tl.abs(x)
    mag = tl.exp2(y * tl.log2(ax))
    yint = tl.floor(y) == y
    half = y * 0.5
    odd = yint & (tl.floor(half) != half) & (tl.abs(y) < 16777216.0)
    r = tl.where(_signbit(x) & odd, mag * -1.0, mag)
    r = tl.where((x < 0) & (~yint) & (tl.abs(y) != float("inf")), float("nan"), r)
    r = tl.where((x == -1.0) & (tl.abs(y) == float("inf")), 1.0, r)
    return tl.where((y == 0) | (x == 1.0), 1.0, r)
''',
    # max + log(1 + exp(-|a - b|)) (base e and base 2); two equal infinities give themselves
    # (their difference is NaN)
    **{name: f'''@triton.jit
def {name}(a, b):
    m = tl.maximum(a, b)
    r = m + tl.{log}(1.0 + tl.{exp}(-tl.abs(a - b)))
    r = tl.where((a == b) & (tl.abs(a) == float("inf")), a, r)
    return tl.where((a != a) | (b != b), a + b, r)
''' for name, log, exp in (("_logaddexp", "log", "exp"), ("_logaddexp2", "log2", "exp2"))},
    "_hypot": '''@triton.jit
def _hypot(x, y):
    # scaled by the larger magnitude (no overflow of x^2); an infinite side wins over NaN
    ax = tl.abs(x)
    ay = tl.abs(y)
    hi = tl.maximum(ax, ay)
    lo = tl.minimum(ax, ay)
    q = lo / tl.where(hi == 0, 1.0, hi)
    r = hi * tl.sqrt(1.0 + q * q)
    r = tl.where((ax != ax) | (ay != ay), float("nan"), r)
    return tl.where((ax == float("inf")) | (ay == float("inf")), float("inf"), r)
''',
    "_nextafter": '''@triton.jit
def _nextafter(x, y):
    # one ulp from x toward y on the bit pattern; from zero, the smallest subnormal of y's sign
    bits = x.to(tl.int32, bitcast=True)
    away = (y > x) == (x > 0)
    step = tl.where(away, bits + 1, bits - 1)
    tiny = tl.where(y < 0, -2147483647, 1)
    r = tl.where(x == 0, tiny, step).to(tl.float32, bitcast=True)
    r = tl.where(x == y, y, r)
    return tl.where((x != x) | (y != y), x + y, r)
''',
    "_lgamma": '''@triton.jit
def _lgamma(x):
    # log|Gamma(x)|: Stirling's series at y >= 8, reached by the recurrence
    # lgamma(y) = lgamma(y + 8) - log(y (y+1) ... (y+7)); below 0.5 the reflection
    # lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x), sin(pi x) taken on x's distance to
    # the nearest integer (exact in fp32). Poles (0, negative integers) and +-inf give +inf.
    y = tl.where(x < 0.5, 1.0 - x, x)
    small = y < 8.0
    p = y * (y + 1.0) * (y + 2.0) * (y + 3.0) * (y + 4.0) * (y + 5.0) * (y + 6.0) * (y + 7.0)
    z = tl.where(small, y + 8.0, y)
    iz = 1.0 / z
    iz2 = iz * iz
    st = (z - 0.5) * tl.log(z) - z + 0.9189385332046727 + iz * (
        8.333333333333333e-2 - iz2 * (2.777777777777778e-3 - iz2 * 7.936507936507937e-4))
    pos = tl.where(small, st - tl.log(p), st)
    f = x - tl.floor(x + 0.5)
    refl = tl.log(3.141592653589793 / tl.abs(tl.sin(3.141592653589793 * f))) - pos
    r = tl.where(x < 0.5, tl.where(f == 0, float("inf"), refl), pos)
    return tl.where(tl.abs(x) == float("inf"), float("inf"), r)
''',
    "_digamma": '''@triton.jit
def _digamma(x):
    # psi(y) = psi(y + 8) - sum 1 / (y + k), the asymptotic series at y >= 8; below 0.5 the
    # reflection psi(x) = psi(1 - x) - pi / tan(pi x). As torch: psi(+0) = -inf, psi(-0) = +inf,
    # NaN at negative integers and -inf, +inf at +inf.
    y = tl.where(x < 0.5, 1.0 - x, x)
    small = y < 8.0
    s = 1.0 / y + 1.0 / (y + 1.0) + 1.0 / (y + 2.0) + 1.0 / (y + 3.0) + 1.0 / (y + 4.0) + 1.0 / (y + 5.0) + \\
        1.0 / (y + 6.0) + 1.0 / (y + 7.0)
    z = tl.where(small, y + 8.0, y)
    iz = 1.0 / z
    iz2 = iz * iz
    series = 8.333333333333333e-2 - iz2 * (8.333333333333333e-3 - iz2 * 3.968253968253968e-3)
    asym = tl.log(z) - 0.5 * iz - iz2 * series
    pos = tl.where(small, asym - s, asym)
    f = x - tl.floor(x + 0.5)
    refl = pos - 3.141592653589793 / (tl.sin(3.141592653589793 * f) / tl.cos(3.141592653589793 * f))
    r = tl.where(x < 0.5, refl, pos)
    r = tl.where((x < 0) & (f == 0), float("nan"), r)
    r = tl.where(x == 0, tl.where(_signbit(x), float("inf"), float("-inf")), r)
    r = tl.where(x == float("inf"), float("inf"), r)
    return tl.where(x == float("-inf"), float("nan"), r)
''',
    "_erfinv_core": '''@triton.jit
def _erfinv_core(x, w):
    # Giles' single-precision approximation (relative error ~4e-7): a polynomial in
    # w - 2.5 for w < 5, in sqrt(w) - 3 beyond, with w = -log(1 - x^2) given by the caller
    a = w - 2.5
    p = 2.81022636e-08
    p = 3.43273939e-07 + p * a
    p = -3.5233877e-06 + p * a
    p = -4.39150654e-06 + p * a
    p = 0.00021858087 + p * a
    p = -0.00125372503 + p * a
    p = -0.00417768164 + p * a
    p = 0.246640727 + p * a
    p = 1.50140941 + p * a
    b = tl.sqrt(w) - 3.0
    q = -0.000200214257
    q = 0.000100950558 + q * b
    q = 0.00134934322 + q * b
    q = -0.00367342844 + q * b
    q = 0.00573950773 + q * b
    q = -0.0076224613 + q * b
    q = 0.00943887047 + q * b
    q = 1.00167406 + q * b
    q = 2.83297682 + q * b
    return tl.where(w < 5.0, p, q) * x
''',
    "_erfinv": '''@triton.jit
def _erfinv(x):
    # erfinv(+-1) = +-inf, NaN past 1
    r = _erfinv_core(x, -tl.log((1.0 - x) * (1.0 + x)))
    r = tl.where(tl.abs(x) == 1.0, x * float("inf"), r)
    return tl.where(tl.abs(x) > 1.0, float("nan"), r)
''',
    "_ndtri": '''@triton.jit
def _ndtri(p):
    # sqrt(2) erfinv(2p - 1), with 1 - (2p - 1)^2 taken as 4p(1 - p): no cancellation in the
    # tails (2p - 1 is -1 in fp32 for p < 3e-8, where ndtri is still finite)
    w = -tl.log(4.0 * p * (1.0 - p))
    r = _erfinv_core(2.0 * p - 1.0, w) * 1.4142135623730951
    # past w = 30 (p < 2e-14) Giles' polynomial leaves its range: Abramowitz and Stegun
    # 26.2.23 (absolute error < 4.5e-4, relative < 6e-5 there)
    t = tl.sqrt(-2.0 * tl.log(p))
    tail = (2.515517 + t * (0.802853 + t * 0.010328)) / (1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))) - t
    r = tl.where((w > 30.0) & (p < 0.5), tail, r)
    r = tl.where(p == 0, float("-inf"), tl.where(p == 1.0, float("inf"), r))
    return tl.where((p < 0) | (p > 1.0), float("nan"), r)
''',
    # Modified Bessel functions of the first kind: Abramowitz and Stegun 9.8.1-9.8.4
    # (absolute error < 1.6e-7 on I0, < 8e-9 on I1 / x below 3.75; < 2.2e-7 on
    # sqrt(x) e^-x I(x) beyond), written scaled (i0e, i1e) so that no e^x overflows there
    "_trigamma": '''@triton.jit
def _trigamma(x):
    # reflection below 1/2: psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x), with pi x reduced by
    # the nearest integer first (exact in fp32), so sin keeps its digits near the poles
    neg = x < 0.5
    z = tl.where(neg, 1.0 - x, x)
    # recurrence psi1(z) = 1 / z^2 + psi1(z + 1) up to z >= 8, then the asymptotic series
    # 1/z + 1/(2z^2) + 1/(6z^3) - 1/(30z^5) + 1/(42z^7) - 1/(30z^9) (next term < 1e-10 there)
    acc = tl.zeros_like(z)
    for _ in tl.static_range(8):
        step = z < 8.0
        acc += tl.where(step, 1.0 / (z * z), 0.0)
        z = tl.where(step, z + 1.0, z)
    w = 1.0 / (z * z)
    r = acc + 1.0 / z + 0.5 * w + w / z * (1.0 / 6.0 - w * (1.0 / 30.0 - w * (1.0 / 42.0 - w / 30.0)))
    f = x - tl.floor(x + 0.5)
    sn = tl.sin(3.141592653589793 * f)
    r = tl.where(neg, 9.869604401089358 / (sn * sn) - r, r)
    # poles at 0, -1, -2, ...; psi1(+inf) = 0, NaN at -inf
    r = tl.where(neg & (f == 0.0), float("inf"), r)
    r = tl.where(x == float("inf"), 0.0, r)
    return tl.where(x == float("-inf"), float("nan"), r)
''',
    "_i0e": '''@triton.jit
def _i0e(x):
    a = tl.abs(x)
    t = (a / 3.75) * (a / 3.75)
    small = 1.0 + t * (3.5156229 + t * (3.0899424 + t * (1.2067492 + t * (0.2659732 + t * (0.0360768
                                                                                           + t * 0.0045813)))))
    u = 3.75 / tl.maximum(a, 3.75)
    big = 0.39894228 + u * (0.01328592 + u * (0.00225319 + u * (-0.00157565 + u * (0.00916281 + u * (
        -0.02057706 + u * (0.02635537 + u * (-0.01647633 + u * 0.00392377)))))))
    return tl.where(a < 3.75, small * tl.exp(-a), big / tl.sqrt(tl.maximum(a, 3.75)))
''',
    "_i0": '''@triton.jit
def _i0(x):
    # e^|x| i0e(x): inf once e^|x| overflows (past 88.7), as torch's fp32 i0 is, though
    # I0 itself stays finite up to ~91.9
    return _i0e(x) * tl.exp(tl.abs(x))
''',
    "_i1e": '''@triton.jit
def _i1e(x):
    a = tl.abs(x)
    t = (a / 3.75) * (a / 3.75)
    small = a * (0.5 + t * (0.87890594 + t * (0.51498869 + t * (0.15084934 + t * (0.02658733 + t * (
        0.00301532 + t * 0.00032411))))))
    u = 3.75 / tl.maximum(a, 3.75)
    big = 0.39894228 + u * (-0.03988024 + u * (-0.00362018 + u * (0.00163801 + u * (-0.01031555 + u * (
        0.02282967 + u * (-0.02895312 + u * (0.01787654 + u * -0.00420059)))))))
    r = tl.where(a < 3.75, small * tl.exp(-a), big / tl.sqrt(tl.maximum(a, 3.75)))
    # odd: the sign of x (NaN stays NaN through a; i1e(-inf) is -0, and -r would be 0 - r)
    return tl.where(x < 0, r * -1.0, r)
''',
    "_i1": '''@triton.jit
def _i1(x):
    return _i1e(x) * tl.exp(tl.abs(x))
''',
    # erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0 (Numerical Recipes' erfcc,
    # relative error < 1.2e-7): its factor exp(-z^2) cancels in erfcx and log_ndtr, so the
    # tails neither underflow nor lose digits
    "_erfcx_pos": '''@triton.jit
def _erfcx_pos(z):
    t = 1.0 / (1.0 + 0.5 * z)
    p = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
        0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    return t, p
''',
    "_erfcx": '''@triton.jit
def _erfcx(x):
    t, p = _erfcx_pos(tl.abs(x))
    r = t * tl.exp(p)
    # erfcx(-z) = 2 e^(z^2) - erfcx(z): overflows to inf below -9.4, as torch's does
    return tl.where(x < 0, 2.0 * tl.exp(x * x) - r, r)
''',
    "_log_ndtr": '''@triton.jit
def _log_ndtr(x):
    # ndtr(x) = erfc(-x / sqrt(2)) / 2
    z = tl.abs(x) * 0.7071067811865476
    t, p = _erfcx_pos(z)
    # x < 0: log(erfc(z) / 2) = log(t / 2) - z^2 + P(t), no underflow however far the tail
    left = tl.log(0.5 * t) - z * z + p
    # x >= 0: log(1 - y) with y = erfc(z) / 2 small; its series where 1 - y rounds
    y = 0.5 * t * tl.exp(p - z * z)
    # (written y * -1.0: torch's log_ndtr is -0 where y is 0, and -y would be 0 - y = +0)
    right = tl.where(y < 1e-4, y * -1.0 - 0.5 * y * y, tl.log(1.0 - y))
    r = tl.where(x < 0, left, right)
    return tl.where(x == float("-inf"), float("-inf"), r)
''',
}

# the helpers each helper calls (codegen emits every helper a rule names, no more)
_CALLS: dict[str, tuple[str, ...]] = {
    "_atan2": ("_atan", "_signbit"),
    "_remainder": ("_fmod",),
    "_floor_divide": ("_fmod", "_signbit"),
    "_pow": ("_signbit",),
    "_digamma": ("_signbit",),
    "_erfinv": ("_erfinv_core",),
    "_ndtri": ("_erfinv_core",),
    "_i0": ("_i0e",), "_i1": ("_i1e",),
    "_erfcx": ("_erfcx_pos",), "_log_ndtr": ("_erfcx_pos",),
}


def _closure(names: tuple[str, ...]) -> tuple[str, ...]:
    out: list[str] = []
    todo = list(names)
    while todo:
        n = todo.pop()
        if n not in out:
            out.append(n)
            todo.extend(_CALLS.get(n, ()))
    return tuple(out)


def literal(value: Any) -> str | None:
    """A Python scalar as Triton source (None: not a plain scalar)."""
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


def operand(a: dict[str, Any], key: str, x: str, val: Val) -> str:
    """Operand ``key`` as a tensor of the input's shape: the helpers call ``tl`` functions
    that take tensors, not Python constants."""
    v = val(a[key])
    return f"(tl.zeros_like({x}) + {v})" if literal(a[key]) is not None else v


def _call(helper: str) -> Rule:
    """A helper of the input alone."""
    return lambda em, a, x, val: em.needs(f"{helper}({x})", *_closure((helper,)))


def _call2(helper: str, other: str = "other") -> Rule:
    """A helper of the input and one more operand."""
    return lambda em, a, x, val: em.needs(f"{helper}({x}, {operand(a, other, x, val)})", *_closure((helper,)))


def _expr(template: str, *helpers: str) -> Rule:
    """``template`` with ``{x}`` for the input (and ``{y}`` for ``other`` when present)."""

    def rule(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
        y = operand(a, "other", x, val) if "{y}" in template else ""
        return em.needs(template.format(x=x, y=y), *_closure(helpers))

    return rule


def _round(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    d = a["decimals"]
    if not isinstance(d, int):
        return None
    if d == 0:
        return em.needs(f"_rint({x})", "_rint")
    # ATen: nearbyint(x * 10^d) / 10^d, or nearbyint(x / 10^-d) * 10^-d for negative d
    ten = repr(float(10.0 ** abs(d)))
    if d > 0:
        return em.needs(f"(_rint({x} * {ten}) / {ten})", "_rint")
    return em.needs(f"(_rint({x} / {ten}) * {ten})", "_rint")


def _nan_to_num(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    fmax = 3.4028234663852886e38
    nan = literal(a["nan"] if a["nan"] is not None else 0.0)
    pos = literal(a["posinf"] if a["posinf"] is not None else fmax)
    neg = literal(a["neginf"] if a["neginf"] is not None else -fmax)
    if None in (nan, pos, neg):
        return None
    return (f"tl.where({x} != {x}, {nan}, tl.where({x} == float(\"inf\"), {pos}, "
            f"tl.where({x} == float(\"-inf\"), {neg}, {x})))")


def _logit(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    eps = a["eps"]
    z = x
    if eps is not None:
        e = literal(eps)
        if e is None:
            return None
        z = f"tl.minimum(tl.maximum({x}, {e}), 1.0 - {e})"
    return f"tl.log({z} / (1.0 - {z}))"


def _lerp(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    # ATen's lerp: the formula from the nearer end keeps lerp(a, b, 1) == b exactly
    e, w = operand(a, "end", x, val), operand(a, "weight", x, val)
    return f"tl.where(tl.abs({w}) < 0.5, {x} + {w} * ({e} - {x}), {e} - ({e} - {x}) * (1.0 - {w}))"


def _addc(op: str) -> Rule:
    def rule(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
        v = literal(a["value"])
        if v is None:
            return None
        return f"({x} + {v} * ({val(a['tensor1'])} {op} {val(a['tensor2'])}))"

    return rule


def _isclose(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    rtol, atol = literal(a["rtol"]), literal(a["atol"])
    if rtol is None or atol is None:
        return None
    y = operand(a, "other", x, val)
    close = f"((({x}) == ({y})) | (tl.abs({x} - {y}) <= {atol} + {rtol} * tl.abs({y})))"
    if a["equal_nan"]:
        close = f"({close} | (({x} != {x}) & ({y} != {y})))"
    return close


def _div_rounding(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    mode = a["rounding_mode"]
    y = operand(a, "other", x, val)
    if mode == "trunc":
        return em.needs(f"_trunc({x} / {y})", "_trunc")
    if mode == "floor":
        return em.needs(f"_floor_divide({x}, {y})", *_closure(("_floor_divide",)))
    return None


def _mvlgamma(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    # torch.mvlgamma: sum_{i < p} lgamma(x - i / 2) + p (p - 1) / 4 * log(pi)
    p = a["p"]
    if not isinstance(p, int) or isinstance(p, bool) or not 1 <= p <= 16:
        return None
    terms = " + ".join(f"_lgamma({x} - {i * 0.5!r})" for i in range(p))
    return em.needs(f"({terms} + {p * (p - 1) / 4 * math.log(math.pi)!r})", "_lgamma")


def _polygamma(em: Emitter, a: dict[str, Any], x: str, val: Val) -> str | None:
    # order 0 is digamma, order 1 trigamma; higher orders stay library calls
    if a["n"] == 0:
        return em.needs(f"_digamma({x})", "_digamma", "_signbit")
    return em.needs(f"_trigamma({x})", "_trigamma") if a["n"] == 1 else None


RAD = repr(math.pi / 180.0)
DEG = repr(180.0 / math.pi)

MATH_RULES: dict[str, Rule] = {
    # unary
    "atan": _call("_atan"),
    "asin": _expr("_atan2({x}, tl.sqrt((1.0 - {x}) * (1.0 + {x})))", "_atan2"),
    "acos": _expr("_atan2(tl.sqrt((1.0 - {x}) * (1.0 + {x})), {x})", "_atan2"),
    "sinh": _call("_sinh"),
    "cosh": _call("_cosh"),
    "tan": _expr("(tl.sin({x}) / tl.cos({x}))"),
    "asinh": _call("_asinh"),
    "acosh": _call("_acosh"),
    "atanh": _call("_atanh"),
    "log10": _expr("(tl.log({x}) * 0.4342944819032518)"),
    "trunc": _call("_trunc"),
    "round": _round,
    "frac": _expr("({x} - _trunc({x}))", "_trunc"),
    "deg2rad": _expr("({x} * " + RAD + ")"),
    "rad2deg": _expr("({x} * " + DEG + ")"),
    "signbit": _call("_signbit"),
    "isnan": _expr("({x} != {x})"),
    "isinf": _expr("(tl.abs({x}) == float(\"inf\"))"),
    "isposinf": _expr("({x} == float(\"inf\"))"),
    "isneginf": _expr("({x} == float(\"-inf\"))"),
    "isfinite": _expr("(tl.abs({x}) < float(\"inf\"))"),
    "isreal": _expr("({x} == {x}) | ({x} != {x})"),
    "logical_not": _expr("({x} == 0)"),
    "nan_to_num": _nan_to_num,
    "sinc": _expr("tl.where({x} == 0, 1.0, tl.sin({x} * 3.141592653589793) / ({x} * 3.141592653589793))"),
    "erfc": _expr("(1.0 - tl.erf({x}))"),
    "logit": _logit,
    "entr": _expr("tl.where({x} > 0, -{x} * tl.log({x}), tl.where({x} == 0, 0.0, "
                  "tl.where({x} < 0, float(\"-inf\"), {x})))"),
    "ndtr": _expr("(0.5 * (1.0 + tl.erf({x} * 0.7071067811865476)))"),
    "lgamma": _call("_lgamma"),
    "erfinv": _call("_erfinv"),
    "ndtri": _call("_ndtri"),
    "i0": _call("_i0"), "i0e": _call("_i0e"), "i1": _call("_i1"), "i1e": _call("_i1e"),
    "erfcx": _call("_erfcx"), "log_ndtr": _call("_log_ndtr"),
    "digamma": _call("_digamma"),
    "mvlgamma": _mvlgamma,
    "polygamma": _polygamma,
    # binary
    "atan2": _call2("_atan2"),
    "copysign": _expr("tl.where(_signbit({y}), tl.abs({x}) * -1.0, tl.abs({x}))", "_signbit"),
    "fmod": _call2("_fmod"),
    "remainder": _call2("_remainder"),
    "floor_divide": _call2("_floor_divide"),
    "div_rounding": _div_rounding,
    "fmax": _expr("tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, tl.maximum({x}, {y})))"),
    "fmin": _expr("tl.where({x} != {x}, {y}, tl.where({y} != {y}, {x}, tl.minimum({x}, {y})))"),
    "logaddexp": _call2("_logaddexp"),
    "logaddexp2": _call2("_logaddexp2"),
    "hypot": _call2("_hypot"),
    "xlogy": _expr("tl.where({y} != {y}, {y}, tl.where({x} == 0, 0.0, {x} * tl.log({y})))"),
    "xlog1py": _expr("tl.where({y} != {y}, {y}, tl.where({x} == 0, 0.0, {x} * tl.log(1.0 + {y})))"),
    "heaviside": lambda em, a, x, val: (f"tl.where({x} == 0, {operand(a, 'values', x, val)}, "
                                        f"tl.where({x} > 0, 1.0, 0.0))"),
    "ldexp": _expr("({x} * tl.exp2({y}))"),
    "pow_tensor": _call2("_pow", "exponent"),
    "nextafter": _call2("_nextafter"),
    "logical_and": _expr("(({x} != 0) & ({y} != 0))"),
    "logical_or": _expr("(({x} != 0) | ({y} != 0))"),
    "logical_xor": _expr("(({x} != 0) != ({y} != 0))"),
    "isclose": _isclose,
    # ternary
    "lerp": _lerp,
    "addcmul": _addc("*"),
    "addcdiv": _addc("/"),
}
