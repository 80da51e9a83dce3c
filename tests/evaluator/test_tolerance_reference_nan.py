"""Rule 4 of the tolerance policy (``worker/tolerance.py``): NaN and infinities of the eager
reference where its float64 run is finite are judged against float64; every other NaN and
inf must still be matched. CPU, real tensors; the last test goes through the whole judge
(Triton interpreter)."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_evaluator.worker import defenses, tolerance
from ke_evaluator.worker.defenses import Outcome
from ke_evaluator.worker.tolerance import compare, compare_values
from kernelevolve.ports.verdict import Verdict

from .sources import candidate, spec_for_tests
from .test_tolerance import _ref_and_variant

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Odd sizes; (3, 1, 1031) and the transposed layouts take the leading-dimension chunking.
SHAPES = [(1,), (7, 3), (13, 257), (3, 1, 1031)]
# None: by device (one chunk here); 7 and 64: chunk boundaries inside every pattern below.
LIMITS = [None, 7, 64]
DEFECT = "NaN or infinities its float64 run has not (a reference defect): judged against float64 there"
INF = float("inf")


def _case(shape: tuple[int, ...], dtype: torch.dtype, transposed: bool, every: int = 5) -> tuple[torch.Tensor, ...]:
    """(eager reference in ``dtype`` with NaN injected at every ``every``-th row-major
    element, as a library that skipped them would leave it; a correct candidate computing
    the same math in another order; the float64 reference, finite everywhere; the NaN
    positions as a boolean mask)."""
    ref, cand, exact = _ref_and_variant(shape, dtype, transposed)
    flat = torch.zeros(ref.numel(), dtype=torch.bool)
    flat[::every] = True
    mask = flat.view(ref.shape)  # row-major positions of the (possibly transposed) output
    ref = ref.clone().masked_fill_(mask, float("nan"))  # in place: keeps ref's strides
    assert ref.stride() == cand.stride()
    return ref, cand, exact, mask


def _assert_defects_reported(res: tolerance.Comparison, n: int) -> None:
    """``n`` reference defects counted, in the bound and in one note."""
    assert res.reference_nan == n and res.figures()["reference_nan_defects"] == n
    assert f"the reference had {n} {DEFECT}" in res.bound
    assert len(res.notes) == 1 and f"the reference had {n} {DEFECT}" in res.notes[0]


def _positions(mask: torch.Tensor) -> list[tuple[int, ...]]:
    return [tuple(int(v) for v in p) for p in mask.nonzero()]


def _flat(pos: tuple[int, ...], shape: torch.Size) -> int:
    return sum(i * s for i, s in zip(pos, torch.empty(shape).stride(), strict=True))


def _assert_named_at_the_defect(ref: torch.Tensor, cand: torch.Tensor, r64: torch.Tensor, pos: tuple[int, ...],
                                limit: int | None, wrongs: dict[str, float]) -> None:
    """At a reference defect ``pos``: each of ``wrongs`` and a value 8 bounds off float64
    fail, the defect named with its flat index; a value just inside |c - r64| <= atol +
    rtol*|r64| passes (the bound is bound 1's, not tighter)."""
    atol, rtol = tolerance.tolerance_for(cand.dtype, None)
    exact = float(r64[pos])
    flat = _flat(pos, ref.shape)
    for what, value in {**wrongs, "off": exact + 8 * (atol + rtol * abs(exact)) + 0.1}.items():
        bad = cand.clone()
        bad[pos] = value
        res = compare(bad, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
        assert not res.ok, what
        assert DEFECT in res.reason and "1 of them are outside" in res.reason, res.reason
        assert f"flat index {flat} = {pos}" in res.reason, res.reason
    edge = cand.clone()
    edge[pos] = torch.tensor(exact + 0.5 * (atol + rtol * abs(exact)), dtype=torch.float64).to(cand.dtype)
    assert compare(edge, ref, None, ref64=lambda: r64, factor=10.0, limit=limit).ok


@pytest.mark.parametrize("limit", LIMITS, ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_candidate_matching_float64_at_reference_nan_passes_and_they_are_counted(
        shape: tuple[int, ...], dtype: torch.dtype, transposed: bool, limit: int | None) -> None:
    ref, cand, r64, mask = _case(shape, dtype, transposed)
    n = int(mask.sum())
    res = compare(cand, ref, None, ref64=lambda: r64, factor=10.0, budget=True, limit=limit)
    assert res.ok, res.reason
    _assert_defects_reported(res, n)
    # The budget is unchanged by the defect elements (eager's error there is undefined).
    assert res.error_ratio is not None and res.error_ratio < 10.0


@pytest.mark.parametrize("limit", LIMITS, ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("shape", [(7, 3), (13, 257), (3, 1, 1031)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_or_a_wrong_value_at_a_reference_nan_fails_and_is_named(
        shape: tuple[int, ...], dtype: torch.dtype, transposed: bool, limit: int | None) -> None:
    ref, cand, r64, mask = _case(shape, dtype, transposed)
    pos = _positions(mask)[-1]  # the last NaN: in the last chunk with the small limits
    _assert_named_at_the_defect(ref, cand, r64, pos, limit, {"nan": float("nan"), "inf": float("inf")})


def test_without_reference_error_the_bound_is_the_eager_bound() -> None:
    """fp32, eager within the tolerance of float64 everywhere: rule 4 adds nothing to
    atol + rtol*|r64| (just outside fails)."""
    ref, cand, r64, mask = _case((13, 257), torch.float32, False)
    pos = _positions(mask)[7]
    exact = float(r64[pos])
    for scale, ok in ((0.5, True), (1.5, False)):
        c = cand.clone()
        c[pos] = exact + scale * (1e-4 + 1e-4 * abs(exact))
        res = compare(c, ref, None, ref64=lambda: r64, factor=10.0, limit=64)
        assert res.ok is ok, res.reason
    assert "largest error around" not in res.reason


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_all_nan_and_garbage_at_the_reference_nan_fail(dtype: torch.dtype) -> None:
    ref, cand, r64, mask = _case((13, 257), dtype, False)
    everywhere = torch.full_like(cand, float("nan"))
    res = compare(everywhere, ref, None, ref64=lambda: r64, factor=10.0)
    assert not res.ok and "NaN where the reference has none" in res.reason
    # Garbage only where the reference is NaN (all it could hope rule 4 excuses).
    garbage = cand.clone()
    garbage[mask] = torch.randn(int(mask.sum()), dtype=torch.float64).to(dtype) * 5
    res = compare(garbage, ref, None, ref64=lambda: r64, factor=10.0)
    assert not res.ok and DEFECT in res.reason
    # A reference that is NaN everywhere (float64 finite): NaN everywhere fails, the float64 answer passes.
    all_nan = torch.full_like(ref, float("nan"))
    res = compare(everywhere, all_nan, None, ref64=lambda: r64, factor=10.0, limit=64)
    assert not res.ok and f"{ref.numel()} of them are outside" in res.reason
    assert compare(cand, all_nan, None, ref64=lambda: r64, factor=10.0, limit=64).ok


@pytest.mark.parametrize("limit", LIMITS, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_that_float64_has_too_must_still_be_matched(dtype: torch.dtype, limit: int | None) -> None:
    ref, cand, r64, mask = _case((13, 257), dtype, False)
    # Genuine NaN (float64 NaN as well) at every 11th element that is not already a defect.
    genuine = torch.zeros(ref.numel(), dtype=torch.bool)
    genuine[3::11] = True
    genuine = genuine.view(ref.shape) & ~mask
    ref, r64 = ref.masked_fill(genuine, float("nan")), r64.masked_fill(genuine, float("nan"))
    n_genuine, n_defect = int(genuine.sum()), int(mask.sum())
    # Finite where both have NaN: fails, whatever it does at the defects.
    res = compare(cand, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert not res.ok
    assert f"misses {n_genuine} NaN the reference has (of {ref.numel()} elements; its float64 run has NaN" \
        in res.reason, res.reason
    # NaN there (and float64's values at the defects): passes, the defects counted.
    good = cand.masked_fill(genuine, float("nan"))
    res = compare(good, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert res.ok and res.reference_nan == n_defect, res.reason
    # One genuine NaN lost: fails.
    one = good.clone()
    one[_positions(genuine)[-1]] = 0.5
    res = compare(one, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert not res.ok and "misses 1 NaN the reference has" in res.reason


def test_float64_beyond_the_dtype_range_is_no_defect() -> None:
    """fp16 eager NaN where float64 is 1e6 (inf in fp16): the correctly rounded answer is
    not finite, so the NaN stands and must be matched."""
    ref = torch.tensor([1.0, float("nan"), 2.0], dtype=torch.float16)
    r64 = torch.tensor([1.0, 1e6, 2.0], dtype=torch.float64)
    for value in (float("inf"), 65504.0):
        res = compare(torch.tensor([1.0, value, 2.0], dtype=torch.float16), ref, None, ref64=lambda: r64, factor=10.0)
        assert not res.ok and "misses 1 NaN" in res.reason and "float16's range" in res.reason
    assert compare(ref.clone(), ref, None, ref64=lambda: r64, factor=10.0).ok


def test_without_a_float64_reference_nan_must_match_as_before() -> None:
    ref, cand, r64, mask = _case((13, 257), torch.float32, False)
    n = int(mask.sum())
    want = f"misses {n} NaN the reference has (of {ref.numel()} elements)"
    assert compare_values(cand, ref, None).reason == f"output[0] {want}"
    assert compare(cand, ref, None).reason == f"output[0] {want}"
    # Rules 2-4 off by the spec (KE_ERROR_BUDGET = False): no float64 run, NaN must match.
    assert compare(cand, ref, None, ref64=lambda: r64, factor=None).reason == f"output[0] {want}"
    assert compare_values(cand.masked_fill(mask, float("nan")), ref, None).ok

    def broken() -> torch.Tensor:
        raise NotImplementedError("no float64 kernel")

    res = compare(cand, ref, None, ref64=broken, factor=10.0)
    assert not res.ok and want.rstrip(")") in res.reason and "float64 reference failed (NotImplementedError)" \
        in res.reason, res.reason


# -- infinities -----------------------------------------------------------------------------------
# On an H200 (2026-11-28) the eager ConvTranspose2d with a 2^31-element output had +/-inf
# where the candidate was finite (an earlier run: NaN), and the candidate was judged
# incorrect ("infinities differ from the reference"): eager inf where float64 is finite is
# the same defect as eager NaN there.

def _inf_case(shape: tuple[int, ...], dtype: torch.dtype, transposed: bool,
              every: int = 5) -> tuple[torch.Tensor, ...]:
    """``_case`` with +inf and -inf (alternating, row-major) instead of its NaN."""
    ref, cand, exact, mask = _case(shape, dtype, transposed, every)
    signs = torch.ones(ref.numel())
    signs[1::2] = -1.0
    ref = ref.clone().masked_scatter_(mask, (signs[: int(mask.sum())] * INF).to(dtype))
    assert int(torch.isinf(ref).sum()) == int(mask.sum()) and not bool(torch.isnan(ref).any())
    return ref, cand, exact, mask


@pytest.mark.parametrize("budget", [True, False], ids=["budget", "no-budget"])
@pytest.mark.parametrize("limit", LIMITS, ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_candidate_matching_float64_at_reference_inf_passes_and_they_are_counted(
        shape: tuple[int, ...], dtype: torch.dtype, transposed: bool, limit: int | None, budget: bool) -> None:
    """Without the budget the float64 run happens because the reference has inf."""
    ref, cand, r64, mask = _inf_case(shape, dtype, transposed)
    n = int(mask.sum())
    calls: list[int] = []

    def ref64() -> torch.Tensor:
        calls.append(1)
        return r64

    res = compare(cand, ref, None, ref64=ref64, factor=10.0, budget=budget, limit=limit)
    assert res.ok, res.reason
    assert calls == [1]
    _assert_defects_reported(res, n)


@pytest.mark.parametrize("limit", LIMITS, ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("shape", [(7, 3), (13, 257), (3, 1, 1031)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_inf_nan_or_a_wrong_value_at_a_reference_inf_fails_and_is_named(
        shape: tuple[int, ...], dtype: torch.dtype, transposed: bool, limit: int | None) -> None:
    ref, cand, r64, mask = _inf_case(shape, dtype, transposed)
    pos = _positions(mask)[-1]  # the last inf: in the last chunk with the small limits
    eager = float(ref[pos])
    # eager's own inf (a kernel that copies the overflow) and the other one
    _assert_named_at_the_defect(ref, cand, r64, pos, limit, {"eager": eager, "other inf": -eager})
    bad = cand.clone()
    bad[pos] = float("nan")
    res = compare(bad, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert not res.ok and "has 1 NaN where the reference has none" in res.reason, res.reason
    # A candidate that copies every inf of eager fails on all of them, without the budget too.
    res = compare(cand.masked_fill(mask, 0.0) + ref.masked_fill(~mask, 0.0), ref, None, ref64=lambda: r64,
                  factor=10.0, limit=limit)
    assert not res.ok and f"{int(mask.sum())} of them are outside" in res.reason, res.reason


@pytest.mark.parametrize("limit", [None, 2], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_eager_inf_that_float64_has_too_must_be_matched(dtype: torch.dtype, limit: int | None) -> None:
    """A true overflow: float64 is inf, or beyond the dtype's range (4x its largest value);
    the candidate must have that inf, same sign."""
    big = torch.finfo(dtype).max * 4.0
    ref = torch.tensor([1.0, INF, -INF, 2.0, INF, -INF, 3.0], dtype=dtype)
    r64 = torch.tensor([1.0, big, -big, 2.0, INF, -INF, 3.0], dtype=torch.float64)
    assert compare(ref.clone(), ref, None, ref64=lambda: r64, factor=10.0, limit=limit).ok
    top = torch.finfo(dtype).max
    for at in (1, 2, 4, 5):
        for value in (-float(ref[at]), top, -top, 0.0):
            c = ref.clone()
            c[at] = value
            res = compare(c, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
            assert not res.ok and res.reason == (
                f"output[0] infinities differ from the reference (1 of 7 elements; its float64 run, rounded to "
                f"{dtype}, is not finite there either)"), (at, value, res.reason)
        c = ref.clone()
        c[at] = float("nan")
        assert "has 1 NaN where the reference has none" in compare(c, ref, None, ref64=lambda: r64,
                                                                   factor=10.0).reason


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_without_a_float64_reference_inf_must_match_as_before(dtype: torch.dtype) -> None:
    ref, cand, r64, mask = _inf_case((13, 257), dtype, False)
    want = "output[0] infinities differ from the reference"
    assert compare_values(cand, ref, None).reason == want
    assert compare(cand, ref, None).reason == want
    # Rules 2-4 off by the spec (KE_ERROR_BUDGET = False): no float64 run, inf must match.
    assert compare(cand, ref, None, ref64=lambda: r64, factor=None).reason == want
    # A float64 output that is no tensor, or of another shape: nothing to judge against.
    assert compare(cand, ref, None, ref64=lambda: r64.reshape(-1), factor=10.0).reason == \
        f"{want} (no float64 output to compare)"
    assert compare_values(cand.masked_fill(mask, 0.0) + ref.masked_fill(~mask, 0.0), ref, None).ok

    def broken() -> torch.Tensor:
        raise NotImplementedError("no float64 kernel")

    res = compare(cand, ref, None, ref64=broken, factor=10.0)
    assert res.reason == f"{want} (float64 reference failed (NotImplementedError))", res.reason


@pytest.mark.parametrize("limit", LIMITS, ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["contiguous", "transposed"])
@pytest.mark.parametrize("shape", [(13, 257), (3, 1, 1031)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nan_and_inf_defects_and_true_infinities_in_one_output(
        shape: tuple[int, ...], dtype: torch.dtype, transposed: bool, limit: int | None) -> None:
    """Eager NaN at every 5th element, +/-inf at every 7th (float64 finite at both), and
    true infinities at every 11th (float64 inf as well) of one output."""
    ref, cand, r64, nan_mask = _case(shape, dtype, transposed)
    flat = torch.zeros(ref.numel(), dtype=torch.bool)
    flat[1::7] = True
    inf_mask = flat.view(ref.shape) & ~nan_mask
    flat = torch.zeros(ref.numel(), dtype=torch.bool)
    flat[2::11] = True
    true_mask = flat.view(ref.shape) & ~nan_mask & ~inf_mask
    signs = torch.where(torch.arange(ref.numel()) % 2 == 0, INF, -INF).view(ref.shape)
    ref = ref.clone()
    ref[inf_mask] = signs[inf_mask].to(dtype)
    ref[true_mask] = signs[true_mask].to(dtype)
    r64 = r64.clone()
    r64[true_mask] = signs[true_mask].to(torch.float64)
    n = int(nan_mask.sum()) + int(inf_mask.sum())
    good = cand.clone()
    good[true_mask] = signs[true_mask].to(dtype)
    res = compare(good, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert res.ok and res.reference_nan == n, res.reason
    assert f"the reference had {n} {DEFECT}" in res.bound
    # The true infinities missed: fails, whatever it does at the defects.
    res = compare(cand, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert not res.ok and f"infinities differ from the reference ({int(true_mask.sum())} of {ref.numel()}" \
        in res.reason, res.reason
    # One value off at an inf defect, one at a NaN defect: both named in the count.
    bad = good.clone()
    for m in (inf_mask, nan_mask):
        p = _positions(m)[0]
        bad[p] = float(r64[p]) + 10.0
    res = compare(bad, ref, None, ref64=lambda: r64, factor=10.0, limit=limit)
    assert not res.ok and DEFECT in res.reason and "2 of them are outside" in res.reason, res.reason


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_an_inf_candidate_where_eager_is_finite_fails(dtype: torch.dtype) -> None:
    """Rule 2 with the float64 run: an inf candidate where eager and float64 are finite fails
    (it used to drop out of rule 2 with the non-finite elements); where float64 rounds to that
    inf in the dtype (beyond its range) it is the correctly rounded value. Eager's error at
    that element (3x the dtype's largest value) makes its largest error around inf in
    float32 (fp32, bf16): an inf candidate is still outside that."""
    top = torch.finfo(dtype).max
    ref = torch.tensor([1.0, 2.0, top, 3.0], dtype=dtype)
    r64 = torch.tensor([1.0, 2.0, top * 4.0, 3.0], dtype=torch.float64)
    for value in (INF, -INF):
        c = ref.clone()
        c[1] = value
        for kw in ({}, {"ref64": lambda: r64, "factor": 10.0}, {"ref64": lambda: r64, "factor": 10.0, "budget": True}):
            res = compare(c, ref, None, **kw)  # type: ignore[arg-type]
            assert not res.ok and "mismatch: 1/4 elements" in res.reason and "flat index 1" in res.reason, \
                (kw, res.reason)
    c = ref.clone()
    c[2] = INF
    assert compare(c, ref, None, ref64=lambda: r64, factor=10.0).ok
    c[2] = -INF
    assert not compare(c, ref, None, ref64=lambda: r64, factor=10.0).ok


def test_the_kernel_dependency_comparison_excuses_reference_nan() -> None:
    """``_still_correct`` asks whether an output is still correct without the candidate's
    kernels: a library result that is finite where eager's NaN is a defect is still correct
    there, and a NaN-filled output is not."""
    ref, cand, _, mask = _case((13, 257), torch.float32, False)
    assert compare_values(cand, ref, None, excuse_reference_nan=True).ok
    assert not compare_values(torch.full_like(cand, float("nan")), ref, None, excuse_reference_nan=True).ok
    assert not compare_values(cand + 1, ref, None, excuse_reference_nan=True).ok
    ref, cand, _, mask = _inf_case((13, 257), torch.float32, False)
    assert compare_values(cand, ref, None, excuse_reference_nan=True).ok
    assert not compare_values(cand.masked_fill(mask, float("nan")), ref, None, excuse_reference_nan=True).ok
    assert not compare_values(cand + 1, ref, None, excuse_reference_nan=True).ok


@pytest.mark.parametrize("make", [_case, _inf_case], ids=["nan", "inf"])
def test_the_repeat_after_the_reference_must_agree_with_the_first_call_at_reference_nan(
        make: Callable[..., tuple[torch.Tensor, ...]]) -> None:
    """Candidate -> reference -> candidate: where eager's NaN (or inf) were judged against
    float64, a second call that returns the reference's memory (NaN or inf there) or other
    values fails."""
    ref, cand, _, mask = make((13, 257), torch.float32, False)
    n = int(mask.sum())
    spec = SimpleNamespace(tolerance=None)
    for second, fails in ((cand.clone(), False), (ref.clone(), True), (cand.masked_fill(mask, 7.0), True)):
        v = Verdict(status="correct", reason="")
        def run(_inputs: list[torch.Tensor], _label: str, out: torch.Tensor = second) -> torch.Tensor:
            return out
        if fails:
            with pytest.raises(Outcome, match="repeat after the reference ran"):
                defenses.crc_and_determinism(run, [torch.zeros(3)], cand, ref, spec, v, n)  # type: ignore[arg-type]
        else:
            defenses.crc_and_determinism(run, [torch.zeros(3)], cand, ref, spec, v, n)  # type: ignore[arg-type]
            assert v.evidence["deterministic"] == "bitwise"


# -- through the judge --------------------------------------------------------------------------
# The spec (tests/evaluator/specs/softmax_overflow.py) overflows float32 in an intermediate:
# eager's NaN at column 3 is inf / inf, float64 says 1.0. A softmax kernel that subtracts the
# row maximum (as every fused softmax does) computes 1.0. It should pass: the operator's value
# there is 1.0, the fused kernel is the better implementation rather than a wrong one, and
# rule 2 already accepts elements where the candidate is closer to float64 than eager (the
# other columns, 0 in eager and ~1e-44 in float64, are inside bound 1 anyway). What a caller
# may rely on still binds: NaN that are the answer (0/0, log of a negative) are NaN in float64
# too, and an output whose value overflows its dtype (what an overflow check such as a loss
# scaler's looks for) is not finite in that dtype, so eager's NaN or inf must be matched. A
# kernel that copies eager's overflow fails: its NaN cannot be told from unwritten, poisoned
# memory (test_adversarial.py, softmax_copies_overflow).

def test_a_stable_softmax_passes_a_spec_whose_eager_overflows(judge: Judge) -> None:
    v = judge.evaluate(spec_for_tests("softmax_overflow"), candidate("ok_softmax_rows"))
    assert v.status == "correct", v.reason
    assert any(DEFECT in w and "(trial 0)" in w for w in v.warnings), v.warnings
    counts = v.evidence["reference_nan_defects"]
    assert counts["trial 0"] == 64 and all(n == 64 for n in counts.values()), counts
    assert v.correctness is not None and all(d["reference_nan_defects"] == 64 for d in v.correctness.details)



@pytest.mark.parametrize("shape", [(13, 257), (5, 3, 7), (1031,)])
def test_the_repeat_after_the_reference_is_held_to_the_first_call_where_rule_2_accepted_outliers(
        shape: tuple[int, ...]) -> None:
    """Where the first call's comparison accepted elements outside eager's bound against
    float64 (rule 2; a reference of finite garbage at most of its elements, seen on a
    2^31-element ConvTranspose2d), the second call must equal the first there, not eager: a
    bitwise repeat passes, the reference's own values or another value fail. Without such
    outliers the repeat is held to eager as before."""
    ref = torch.randn(*shape)
    first = ref.clone()
    first.view(-1)[::11] += 1.0  # outside eager's bound (float64 said the candidate is right)
    outliers = first.view(-1)[::11].numel()
    spec = SimpleNamespace(tolerance=None)
    moved = first.clone()
    moved.view(-1)[3] += 0.5
    for second, outl, fails in ((first.clone(), outliers, False), (ref.clone(), outliers, True),
                                (moved, outliers, True), (first.clone(), 0, True)):
        v = Verdict(status="correct", reason="")

        def run(_inputs: list[torch.Tensor], _label: str, out: torch.Tensor = second) -> torch.Tensor:
            return out
        if fails:
            with pytest.raises(Outcome, match="repeat after the reference ran"):
                defenses.crc_and_determinism(run, [torch.zeros(3)], first, ref, spec, v,  # type: ignore[arg-type]
                                             0, outl)
        else:
            defenses.crc_and_determinism(run, [torch.zeros(3)], first, ref, spec, v, 0, outl)  # type: ignore[arg-type]
            assert v.evidence["deterministic"] == "bitwise"
