"""The long-tail sweep over PyTorch's operator database (bench/opinfo_sweep.py) as tests.

Each counted OpInfo entry (deterministic, a float32 sample, tensor outputs, outside
``linalg.*`` / ``fft.*``: bench/opinfo_specs.py) becomes a spec calling the operator on
its first float32 CPU sample; it passes when the offline synthesizer's seed candidate is
Triton only (no library call) and the evaluator judges it correct in the interpreter.

``opinfo_expected_failures.txt`` lists the entries that do not pass yet. It can only
shrink: an entry on it that passes fails its test, asking for its removal; an entry off it
that fails, fails. A fast subset across the families runs by default, every counted entry
under ``slow``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from tests.bench_scripts import load_bench_script
from tests.conftest import REPO_ROOT

EXPECTED_FAILURES = REPO_ROOT / "tests" / "synthesizer" / "opinfo_expected_failures.txt"
COMMITTED = REPO_ROOT / "bench" / "results" / "opinfo_sweep_cpu.json"

# A few entries of each family, in the default run (the whole sweep is ``slow``): pointwise
# unary and binary math, reductions, scans, normalisation, losses, convolution, matmul,
# pooling, casts, reflected operators and operators with several outputs.
FAST = [
    "abs", "acos", "atan2", "fmod", "remainder", "floor_divide", "div.floor_rounding", "lerp", "logaddexp",
    "isnan", "special.erfcx", "lgamma", "where", "clamp", "nn.functional.gelu", "__rsub__", "__rpow__",
    "sum", "amax", "all", "var", "softmax.with_dtype", "nansum", "cumsum", "logcumsumexp",
    "max.reduction_with_dim", "aminmax", "var_mean", "nn.functional.layer_norm", "nn.functional.mse_loss",
    "nn.functional.conv2d", "nn.functional.linear", "nn.functional.avg_pool2d", "double",
    "T", "reshape", "split",
]


def _expected_failures() -> list[str]:
    lines = EXPECTED_FAILURES.read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]


def _committed() -> dict[str, Any]:
    return json.loads(COMMITTED.read_text())  # type: ignore[no-any-return]


def _counted_entries() -> list[str]:
    return [r["entry"] for r in _committed()["rows"] if r["group"] == "counted"]


@pytest.fixture(scope="module")
def sweep() -> ModuleType:
    return load_bench_script("opinfo_sweep")


@pytest.fixture(scope="module")
def specs(sweep: ModuleType) -> ModuleType:
    return sweep.opinfo_specs  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def ops(specs: ModuleType) -> dict[str, Any]:
    return {specs.entry_name(op): op for op in specs.op_db()}


@pytest.fixture(scope="module")
def offline() -> OfflineSynthesizer:
    return OfflineSynthesizer()


def _judged(entry: str, ops: dict[str, Any], sweep: ModuleType, synth: OfflineSynthesizer, judge: Judge) -> Any:
    spec = sweep.opinfo_specs.classify(ops[entry])
    row, candidate = sweep.lower(synth, spec, 120)
    if spec.source is not None:
        sweep.judge_row(judge, row, spec.source,
                        candidate if row.lowering in (sweep.TRITON, sweep.PARTLY) else None)
    return row


def _check(entry: str, ops: dict[str, Any], sweep: ModuleType, synth: OfflineSynthesizer, judge: Judge) -> None:
    if entry not in ops:
        pytest.skip(f"{entry} is not in this torch's operator database")
    row = _judged(entry, ops, sweep, synth, judge)
    if row.group != "counted":
        pytest.skip(f"{entry} does not count with this torch: {row.reason}")
    expected = entry in set(_expected_failures())
    what = f"{row.lowering} {row.verdict} {row.error or row.verdict_reason}".strip()
    if row.nothing_to_compute:
        # the evaluator's own end for a view-only reference: neither a pass nor a failure
        assert not expected, f"{entry} has nothing to compute: remove it from {EXPECTED_FAILURES.name}"
        assert row.verdict_reason.startswith("nothing to compute"), row.verdict_reason
        assert entry in _committed()["summary"]["nothing_to_compute"], what
        return
    if row.passes:
        assert not expected, (f"{entry} now lowers to Triton only and is judged correct: remove it from "
                              f"{EXPECTED_FAILURES.name}")
    else:
        assert expected, f"{entry} no longer passes: {what}"
        pytest.xfail(what)


@pytest.mark.parametrize("entry", FAST)
def test_fast_subset(entry: str, ops: dict[str, Any], sweep: ModuleType, offline: OfflineSynthesizer,
                     judge: Judge) -> None:
    _check(entry, ops, sweep, offline, judge)


@pytest.mark.slow
@pytest.mark.parametrize("entry", _counted_entries())
def test_every_counted_entry(entry: str, ops: dict[str, Any], sweep: ModuleType, offline: OfflineSynthesizer,
                             judge: Judge) -> None:
    _check(entry, ops, sweep, offline, judge)


# -- the spec tool and the committed result ------------------------------------------------


def test_the_expected_failure_list_is_sorted_and_names_counted_entries() -> None:
    names = _expected_failures()
    assert names == sorted(set(names)), "keep the list sorted, one entry a line"
    counted = set(_counted_entries())
    assert set(names) <= counted, f"not counted entries: {sorted(set(names) - counted)}"


def test_the_committed_result_agrees_with_the_list() -> None:
    result = _committed()
    counted = [r for r in result["rows"] if r["group"] == "counted"]
    passing = {r["entry"] for r in counted if r["lowering"] == "triton" and r["verdict"] == "correct"}
    views = {r["entry"] for r in counted if r["verdict"] == "nothing_to_compute"}
    assert passing == {r["entry"] for r in counted} - set(_expected_failures()) - views
    summary = result["summary"]
    assert summary["counted"] == len(counted)
    assert sorted(views) == summary["nothing_to_compute"]
    assert summary["counted_nothing_to_compute"] == len(views)
    assert math.isclose(summary["fraction"], len(passing) / len(counted))
    assert summary["counted_with_compute"] == len(counted) - len(views)
    assert math.isclose(summary["fraction_with_compute"], len(passing) / (len(counted) - len(views)))
    for key in ("date", "torch", "triton", "python", "cpu"):
        assert result["host"][key]


@pytest.mark.parametrize(("entry", "group", "reason"), [
    ("empty", "ineligible", "nondeterministic: uninitialised memory"),
    ("bernoulli", "ineligible", "nondeterministic: a random operator"),
    ("nn.functional.dropout", "ineligible", "nondeterministic: a random operator"),
    ("allclose", "ineligible", "returns bool, not tensors"),
    ("bitwise_and", "ineligible", "no float32 on the CPU"),
    ("arange", "ineligible", "a factory: the sample has no tensor argument"),
    ("linalg.inv", "linalg_fft", ""),
    ("fft.fft", "linalg_fft", ""),
    ("max.reduction_with_dim", "counted", ""),
])
def test_eligibility(entry: str, group: str, reason: str, ops: dict[str, Any], specs: ModuleType) -> None:
    spec = specs.classify(ops[entry])
    assert (spec.group, spec.reason) == (group, reason)
    assert (spec.source is not None) == (reason == "")


@pytest.mark.parametrize("entry", ["__getitem__", "softmax.with_dtype", "T", "max.reduction_with_dim", "cat",
                                   "nn.functional.embedding", "to"])
def test_a_spec_calls_the_operator_on_its_sample(entry: str, ops: dict[str, Any], specs: ModuleType) -> None:
    """Slices, dtypes, lambdas of the database, several outputs, tensor lists, index inputs
    and devices: the spec's forward returns exactly what the operator returns."""
    op = ops[entry]
    spec = specs.classify(op)
    assert spec.source is not None, spec.reason
    sample = specs.first_sample(op)
    expected = specs._tensors(specs._call(op, sample, 0))
    assert specs._same(specs.run_spec(spec.source), expected)
    compile(spec.source, entry, "exec")


def test_literals_keep_special_values(specs: ModuleType) -> None:
    import torch

    t = torch.tensor([[float("nan"), float("inf")], [-float("inf"), -0.0]])
    ns: dict[str, Any] = {"torch": torch, "nan": float("nan"), "inf": float("inf")}
    back = eval(specs.tensor_literal(t), ns)  # noqa: S307 - our own literal
    assert back.shape == t.shape and back.dtype == t.dtype
    assert torch.isnan(back[0, 0]) and back[0, 1] == float("inf") and back[1, 0] == -float("inf")
    assert math.copysign(1.0, float(back[1, 1])) == -1.0
    assert eval(specs.tensor_literal(torch.tensor(3, dtype=torch.int64)), ns).dtype == torch.int64  # noqa: S307


def _row(sweep: ModuleType, entry: str, lowering: str, verdict: str) -> Any:
    return sweep.Row(entry, "OpInfo", "counted", "", 1, lowering=lowering, verdict=verdict)


def test_a_view_only_entry_is_its_own_class_in_the_summary(sweep: ModuleType) -> None:
    """Nothing to compute is neither a pass nor a failure: the headline is given over every
    counted entry and over those with something to compute."""
    rows = [_row(sweep, "abs", "triton", "correct"), _row(sweep, "T", "triton", "nothing_to_compute"),
            _row(sweep, "reshape", "library", "nothing_to_compute"), _row(sweep, "sort", "library", ""),
            _row(sweep, "eq", "triton", "rejected")]
    summary = sweep.summarize(rows, True)
    assert summary["counted_nothing_to_compute"] == 2 and summary["nothing_to_compute"] == ["T", "reshape"]
    assert summary["counted_triton_correct"] == 1
    assert math.isclose(summary["fraction"], 1 / 5)
    assert summary["counted_with_compute"] == 3 and math.isclose(summary["fraction_with_compute"], 1 / 3)
    assert "T" not in summary["suspect_evaluator"]


def test_judging_a_view_only_spec_ends_with_nothing_to_compute(ops: dict[str, Any], sweep: ModuleType,
                                                               offline: OfflineSynthesizer, judge: Judge) -> None:
    """Before the sweep knew the class, ``.T`` was judged 'rejected' (its copy kernel only
    moves data) or, library-lowered, never judged at all."""
    for entry in ("T", "unsqueeze"):
        row = _judged(entry, ops, sweep, offline, judge)
        assert row.verdict == "nothing_to_compute", (entry, row.verdict, row.verdict_reason)
        assert row.verdict_reason.startswith("nothing to compute: the reference only reshapes its inputs")
        assert not row.passes and not row.evaluator_failure


def test_merge_replaces_the_rerun_rows_and_recomputes_the_summary(sweep: ModuleType) -> None:
    from dataclasses import asdict

    old_rows = [_row(sweep, "abs", "triton", "correct"), _row(sweep, "cummax", "library", "")]
    new_rows = [_row(sweep, "cummax", "triton", "correct")]
    old = {"host": {"date": "old"}, "summary": sweep.summarize(old_rows, True),
           "rows": [asdict(r) for r in old_rows]}
    new = {"host": {"date": "new"}, "summary": sweep.summarize(new_rows, True),
           "rows": [asdict(r) for r in new_rows]}
    merged = sweep.merge(old, new, True)
    assert [r["entry"] for r in merged["rows"]] == ["abs", "cummax"]
    assert merged["summary"]["counted_triton_correct"] == 2 and merged["host"]["date"] == "new"


def _iter_rows() -> Iterator[dict[str, Any]]:
    yield from _committed()["rows"]


def test_every_committed_row_is_classified() -> None:
    lowerings = {"triton", "partly", "library", "error", "no_spec", ""}
    for row in _iter_rows():
        assert row["lowering"] in lowerings, row
        if row["group"] == "counted":
            assert row["lowering"], row
