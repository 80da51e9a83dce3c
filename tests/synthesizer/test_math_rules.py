"""The long tail's pointwise math (emit/math_rules.py) against torch on the values where
definitions differ: NaN, +-inf, signed zeros, domain edges, halfway points of rounding and
the signs of integer-style division and modulo. Each op's seed candidate runs in the
interpreter; values must match (NaN where torch has NaN) and a zero must carry torch's sign."""

from __future__ import annotations

import math

import pytest
import torch

from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest
from tests.synthesizer.conftest import candidate_and_reference

INF, NAN = math.inf, math.nan
# special values, then ordinary ones: 33 elements (an odd length: a masked tail)
SPECIAL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 0.49999997, 1e-30, -1e-30,
           3e38, -3e38, 88.5, -88.5, 1e5, 0.99, -0.99, 7.0, -7.0, 3.25, -3.25, 12.0, 0.001, -0.001, 5.1, -5.1, 1.7]
OTHER = [1.0, 2.0, -2.0, INF, -INF, NAN, 0.0, -0.0, 1.7, -1.7, 0.5, 3.0, -3.0, 2.0, 0.3, -0.3, 1.0, -1.0, 7.0,
         -7.0, 1.5, 2.0, -2.0, 0.0, 3.0, 1.7, -1.7, 5.0, 0.25, -0.25, 1.7, -1.7, 5.1]
SPEC = '''
import torch
import torch.nn as nn

inf, nan = float("inf"), float("nan")


class Model(nn.Module):
    def forward(self, x, y):
        return {body}


def get_inputs():
    return [torch.tensor({x!r}).float(), torch.tensor({y!r}).float()]


def get_init_inputs():
    return []
'''

UNARY = ["torch.atan(x)", "torch.asin(x)", "torch.acos(x)", "torch.sinh(x)", "torch.cosh(x)", "torch.tan(x)",
         "torch.asinh(x)", "torch.acosh(x)", "torch.atanh(x)", "torch.log10(x)", "torch.trunc(x)", "torch.round(x)",
         "torch.round(x, decimals=2)", "torch.frac(x)", "torch.deg2rad(x)", "torch.signbit(x)", "torch.isnan(x)",
         "torch.isinf(x)", "torch.isfinite(x)", "torch.isposinf(x)", "torch.logical_not(x)", "torch.nan_to_num(x)",
         "torch.sinc(x)", "torch.erfc(x)", "torch.special.entr(x)", "torch.special.ndtr(x)", "torch.logit(x, 1e-6)",
         "torch.lgamma(x)", "torch.digamma(x)", "torch.erfinv(x)", "torch.special.ndtri(x)", "torch.polygamma(0, x)",
         "torch.mvlgamma(x.abs() + 2.0, 3)", "torch.i0(x)", "torch.special.i0e(x)", "torch.special.i1(x)",
         "torch.special.i1e(x)", "torch.special.modified_bessel_i0(x)", "torch.special.erfcx(x)",
         "torch.special.log_ndtr(x)"]
BINARY = ["torch.atan2(x, y)", "torch.copysign(x, y)", "torch.fmod(x, y)", "torch.remainder(x, y)",
          "torch.floor_divide(x, y)", "torch.div(x, y, rounding_mode='trunc')", "torch.fmax(x, y)",
          "torch.fmin(x, y)", "torch.logaddexp(x, y)", "torch.logaddexp2(x, y)", "torch.hypot(x, y)",
          "torch.xlogy(x, y)", "torch.nextafter(x, y)", "torch.pow(x, y)", "torch.heaviside(x, y)",
          "torch.logical_xor(x, y)", "torch.lerp(x, y, 0.75)", "torch.addcdiv(x, x, y, value=0.5)",
          "x.__rpow__(y)", "x.__rmod__(y)", "x.__rsub__(y)", "torch.fmod(x, 1.5)", "torch.remainder(x, -2)",
          "x % y", "x // y"]


# fmod and what builds on it are exact while |x / y| < 2^24 (math_rules._fmod says why)
DIVMOD = ("fmod", "remainder", "floor_divide", "%", "//", "__rmod__")


def _run(body: str) -> tuple[torch.Tensor, torch.Tensor, str]:
    xs = [v if abs(v) < 1e30 or not any(d in body for d in DIVMOD) else math.copysign(3e6, v) for v in SPECIAL]
    src = SPEC.format(body=body, x=xs, y=OTHER)
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="math_edge", count=1))
    assert not seed.fallback_nodes, f"{body} left to the library: {seed.fallback_nodes}"
    got, want = candidate_and_reference(src, seed.source)
    return got, want, seed.source


def _agree(got: torch.Tensor, want: torch.Tensor, body: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == torch.bool:
        assert torch.equal(got, want), body
        return
    torch.testing.assert_close(got, want, rtol=2e-5, atol=1e-6, equal_nan=True, msg=body)
    zeros = want == 0
    assert torch.equal(torch.signbit(got[zeros]), torch.signbit(want[zeros])), f"{body}: the sign of a zero"


@pytest.mark.parametrize("body", UNARY + BINARY)
def test_special_values_match_torch(body: str) -> None:
    got, want, source = _run(body)
    _agree(got, want, body)
    assert "libdevice" not in source  # the interpreter has no libdevice


def test_integer_division_signs_follow_torch() -> None:
    """fmod takes the dividend's sign, remainder the divisor's, floor_divide rounds down,
    on every sign combination and on quotients whose fp32 rounding is one off."""
    xs = [7.0, -7.0, 7.0, -7.0, 5.1, -5.1, 0.3, 1e6 + 1.0, -0.0, 6.0]
    ys = [2.0, 2.0, -2.0, -2.0, 1.7, 1.7, 0.1, 3.0, 5.0, -3.0]
    for body in ("torch.fmod(x, y)", "torch.remainder(x, y)", "torch.floor_divide(x, y)"):
        src = SPEC.format(body=body, x=xs, y=ys)
        (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="divmod", count=1))
        _agree(*candidate_and_reference(src, seed.source), body)


BESSEL_AND_TAILS = ["torch.i0(x)", "torch.special.i0e(x)", "torch.special.i1(x)", "torch.special.i1e(x)",
                    "torch.special.erfcx(x)", "torch.special.log_ndtr(x)"]


@pytest.mark.parametrize("n", [1, 7, 1000])
@pytest.mark.parametrize("body", BESSEL_AND_TAILS)
def test_bessel_and_gaussian_tails_over_their_range(body: str, n: int) -> None:
    """i0 / i1 (and their scaled forms) on both sides of 3.75, where the approximation
    changes, past e^x's fp32 overflow at 88.7 (inf there, as torch's); erfcx and log_ndtr deep into both tails,
    where e^(x^2) and erfc under- or overflow on their own."""
    xs = torch.linspace(-95.0, 95.0, n).tolist() if n > 1 else [3.75]
    src = SPEC.format(body=body, x=xs, y=[1.0] * n)
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="tails", count=1))
    assert not seed.fallback_nodes, seed.fallback_nodes
    got, want = candidate_and_reference(src, seed.source)
    torch.testing.assert_close(got, want, rtol=2e-5, atol=1e-6, equal_nan=True, msg=body)


@pytest.mark.parametrize("n", [1, 7, 200])
def test_trigamma_matches_torch_off_its_poles(n: int) -> None:
    """polygamma(1, x) (a library call before): the recurrence, the asymptotic series and the
    reflection below 1/2, on the special values and across both signs. The negative integers
    are left out: there torch returns round-off of its pole (polygamma(1, -1.0) is 1.29e15 in
    fp32), the kernel inf; 0 and -0 (inf in both) stay in."""
    xs = [v for v in SPECIAL if not (-INF < v < 0 and v == int(v))] + torch.linspace(-9.7, 30.0, n).tolist()
    src = SPEC.format(body="torch.polygamma(1, x)", x=xs, y=[1.0] * len(xs))
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="trigamma", count=1))
    assert not seed.fallback_nodes, seed.fallback_nodes
    _agree(*candidate_and_reference(src, seed.source), "torch.polygamma(1, x)")
