"""Phase limits that grow with the spec's measured reference cost (``ke_evaluator.phase_limits``):
the arithmetic and the parent's rules on their own, then real sandboxed workers on the CPU
with a deliberately slow reference and run limits far below what its protocol needs."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from ke_evaluator.judge import EvalOptions, Judge, WorkerPoolOptions
from ke_evaluator.phase_limits import JobLimits, LimitPolicy, ReferenceCost
from kernelevolve.config import load_settings
from kernelevolve.errors import InvalidArgumentError

from .sources import candidate, example, spec_for_tests

SLOW = spec_for_tests("slow_reference")
RELU = example("relu_scale_add")
OK = candidate("ok_relu_scale_add")
# Far below the slow reference's protocol: three reference calls and two float64 runs in
# the run phase alone, each a tenth of a second or more on the 2-core test host.
RUN_S = 0.1
# The test judge's factor: on that host, loaded by other work, the reference's calls inside
# the run phase took up to 2x what its measure phase had seen (0.17 s measured, 0.24-0.33 s
# in the run), so the test leaves twice the default's room for the correct candidate.
FACTOR = 8.0

POLICY = LimitPolicy(compile_timeout_s=10.0, run_timeout_s=20.0, run_timeout_max_s=1000.0, factor=3.0,
                     correctness_trials=5, time_candidates=True, min_timing_trials=3, timing_input_sets=3)
COST = ReferenceCost(eager_s=2.0, float64_s=5.0, inputs_s=1.0, build_s=0.5, check_s=0.25, extra_sets=1,
                     float64_on="host")


# -- the arithmetic ---------------------------------------------------------------------------
def test_the_limits_follow_the_documented_formula() -> None:
    lim = POLICY.limits(COST)
    calls = lim.evidence["protocol"]
    # 5 trials + 1 extra set; timing: 2 contestants x (3 warm-up + 3 rounds + 1 past the budget)
    assert calls == {"sets": 6, "reference_calls": 7, "candidate_calls": 10, "timing_calls": 14,
                     "float64_runs": 6, "checks": 15, "input_sets_made": 8}
    run_work = (7 + 10 + 14) * 2.0 + 6 * 5.0 + 15 * 0.25 + 8 * 1.0
    assert lim.evidence["run_work_s"] == run_work == 103.75
    assert lim.run_s == 20.0 + 3.0 * run_work
    assert lim.compile_s == 10.0 + 3.0 * (2 * 0.5 + 1.0 + 2.0)
    assert lim.measure_s == 1000.0
    ev = lim.evidence
    assert (ev["basis"], ev["factor"], ev["cap_s"], ev["capped"]) == ("reference cost", 3.0, 1000.0, [])
    assert ev["fixed"] == {"compile_s": 10.0, "run_s": 20.0}
    assert ev["reference_cost"] == COST.to_dict()
    reason = lim.explain("run")
    assert "exceeded 331.2 s" in reason and "20 s fixed + 3 x 104 s" in reason


def test_a_small_spec_keeps_its_fixed_limits_and_the_cap_holds() -> None:
    tiny = ReferenceCost(eager_s=1e-4, float64_s=1e-3, inputs_s=1e-5, build_s=1e-3, check_s=1e-4, extra_sets=0)
    assert POLICY.limits(tiny).run_s < 20.0 + 0.05
    huge = ReferenceCost(eager_s=100.0, float64_s=100.0, inputs_s=0.0, build_s=0.0, check_s=0.0, extra_sets=0)
    lim = POLICY.limits(huge)
    assert (lim.run_s, lim.evidence["capped"]) == (1000.0, ["run"])
    assert "capped at 1000 s" in lim.explain("run")
    # A fixed limit above the cap is never cut below itself.
    high = LimitPolicy(compile_timeout_s=2000.0, run_timeout_s=20.0, run_timeout_max_s=1000.0)
    assert high.limits(huge).compile_s == 2000.0


def test_fixed_limits_without_a_cost_or_with_the_scaling_off() -> None:
    unknown = POLICY.limits(None)
    assert (unknown.compile_s, unknown.run_s) == (10.0, 20.0)
    assert unknown.evidence["basis"] == "reference cost not measured yet"
    off = LimitPolicy(run_timeout_s=20.0, factor=0.0)
    assert off.limits(COST).run_s == 20.0 and "scaling off" in off.limits(COST).evidence["basis"]
    assert not JobLimits(off, measure=True).measure  # nothing to measure for
    assert off.upper_bounds() == (120.0, 20.0) and POLICY.upper_bounds() == (1000.0, 1000.0)


def test_only_plausible_costs_are_read_and_merging_keeps_the_smaller() -> None:
    good = COST.to_dict()
    assert ReferenceCost.from_dict(good) == COST
    for bad in ({**good, "eager_s": math.nan}, {**good, "float64_s": -1.0}, {**good, "extra_sets": True},
                {**good, "extra_sets": -1}, {k: v for k, v in good.items() if k != "inputs_s"}, None, [1]):
        assert ReferenceCost.from_dict(bad) is None, bad
    later = ReferenceCost(eager_s=1.0, float64_s=9.0, inputs_s=1.0, build_s=0.5, check_s=0.5, extra_sets=1,
                          float64_on="device")
    merged = COST.merged(later)
    assert (merged.eager_s, merged.float64_s, merged.check_s, merged.float64_on) == (1.0, 5.0, 0.25, "host")


def test_phases_move_forward_and_a_cost_comes_only_from_the_end_of_the_measure_phase() -> None:
    forged = {**COST.to_dict(), "eager_s": 1e6}
    limits = JobLimits(POLICY, measure=True)
    assert limits.seconds() == 1000.0  # the measure phase runs under the cap
    assert limits.enter({"phase": "measure"})
    assert limits.enter({"phase": "compile", "reference_cost": COST.to_dict()})
    assert limits.measured == COST and limits.seconds() == POLICY.limits(COST).compile_s
    assert limits.evidence()["reference_cost_source"].startswith("measured by this job")
    # Everything after the measure phase: repeats and steps back are ignored.
    for msg in ({"phase": "measure"}, {"phase": "compile", "reference_cost": forged}):
        assert not limits.enter(msg)
    assert limits.enter({"phase": "run", "reference_cost": forged})
    assert not limits.enter({"phase": "run"})
    assert limits.cost == COST and limits.seconds() == POLICY.limits(COST).run_s
    # A job that was not asked to measure has no measure phase and learns no cost.
    stored = JobLimits(POLICY, COST, measure=False, cost_source="earlier job")
    assert not stored.enter({"phase": "measure"})
    assert stored.enter({"phase": "compile", "reference_cost": forged})
    assert stored.cost == COST and stored.measured is None
    unknown = JobLimits(POLICY, measure=False)
    assert unknown.enter({"phase": "compile", "reference_cost": forged}) and unknown.cost is None


def test_options_check_and_carry_the_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        EvalOptions(run_timeout_s=100.0, run_timeout_max_s=50.0).validate()
    with pytest.raises(InvalidArgumentError):
        EvalOptions(reference_cost_factor=-1.0).validate()
    from ke_evaluator.judge import options_from_settings

    cfg = tmp_path / "ke.yaml"
    cfg.write_text("evaluator:\n  hardware_kind: cpu\n  run_timeout_max_s: 900\n")
    settings = load_settings(cfg, env={"KE_EVALUATOR_REFERENCE_COST_FACTOR": "2.5"}).evaluator
    opts = options_from_settings(settings)
    assert (opts.run_timeout_max_s, opts.reference_cost_factor) == (900.0, 2.5)


# -- real workers ---------------------------------------------------------------------------
def _options(root: Path, **kw: object) -> EvalOptions:
    base = dict(device="cpu", correctness_trials=2, time_candidates=False, compile_timeout_s=60.0,
                run_timeout_s=RUN_S, scratch_dir=str(root), pool=WorkerPoolOptions(reuse_worker_after_failure=True))
    base.update(kw)
    return EvalOptions(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def scaled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """The default cap; a run limit the slow reference's protocol cannot meet. The static
    policy is off: it would reject the spinner's call counter before any worker ran."""
    with Judge(_options(tmp_path_factory.mktemp("scaled"), enforce_static_policy=False,
                        reference_cost_factor=FACTOR)) as j:
        yield j


def test_a_slow_reference_gets_a_longer_run_limit_and_a_spinner_still_times_out(scaled: Judge) -> None:
    # The spec's first job measures the reference before it loads its candidate: a candidate
    # that spins for hours gets the limit of the reference's work, and times out.
    spin = scaled.evaluate(SLOW, candidate("spin_after_first_call"), candidate_id="spin")
    assert spin.status == "timeout", spin.reason
    cost = scaled.reference_cost(SLOW)
    assert cost is not None and cost.extra_sets == 0
    pl = spin.evidence["phase_limits"]
    assert pl["reference_cost_source"] == "measured by this job before its candidate was loaded"
    assert pl["reference_cost"] == cost.to_dict()
    policy = LimitPolicy.from_job_options(scaled._job_options())  # noqa: SLF001 - the limits the worker ran under
    expected = policy.limits(cost)
    assert pl["run_s"] == round(expected.run_s, 3) and expected.run_s > RUN_S
    assert "run phase" in spin.reason and "of the reference's measured protocol work" in spin.reason
    # The premise: the reference's own run-phase work alone outlasts the fixed limit.
    calls = pl["protocol"]
    assert calls["reference_calls"] * cost.eager_s + calls["float64_runs"] * cost.float64_s > RUN_S

    # A correct candidate of the spec under the stored cost, twice (the second with the
    # worker's reference cache warm): correct, and its evidence says why the limit is what it is.
    for i in range(2):
        v = scaled.evaluate(SLOW, OK, candidate_id=f"ok{i}")
        assert v.status == "correct", v.reason
        pl = v.evidence["phase_limits"]
        assert pl["basis"] == "reference cost" and pl["factor"] == FACTOR and pl["cap_s"] == 1800.0
        assert pl["reference_cost_source"].startswith("measured by an earlier job of the spec")
        assert pl["fixed"]["run_s"] == RUN_S and pl["run_s"] == round(expected.run_s, 3)
        assert pl["reference_cost"]["eager_s"] > 0 and pl["run_work_s"] > 0
    assert scaled.reference_cost(SLOW) == cost  # nothing the candidates did changed it


def test_the_fixed_limit_alone_times_the_same_candidate_out(tmp_path: Path) -> None:
    with Judge(_options(tmp_path, reference_cost_factor=0.0)) as judge:
        v = judge.evaluate(SLOW, OK)
        assert v.status == "timeout", v.reason
        assert "run phase" in v.reason and "fixed limit" in v.reason
        assert v.evidence["phase_limits"]["run_s"] == RUN_S
        assert judge.reference_cost(SLOW) is None  # nothing measured with the scaling off


def test_the_cap_holds(tmp_path: Path) -> None:
    # A cap above the measure phase's one call and float64 run, below what the spec's
    # protocol work asks for: the spinner is stopped at the cap.
    cap = 2.0
    with Judge(_options(tmp_path, run_timeout_max_s=cap, reference_cost_factor=FACTOR,
                        enforce_static_policy=False)) as judge:
        v = judge.evaluate(SLOW, candidate("spin_after_first_call"))
        assert v.status == "timeout", v.reason
        pl = v.evidence["phase_limits"]
        assert RUN_S + FACTOR * pl["run_work_s"] > cap  # what it would have been
        assert pl["run_s"] == cap and "run" in pl["capped"]
        assert f"capped at {cap:g} s" in v.reason


def test_forged_phase_messages_lengthen_nothing(tmp_path: Path) -> None:
    with Judge(_options(tmp_path, run_timeout_s=1.0, enforce_static_policy=False)) as judge:
        v = judge.evaluate(RELU, candidate("forge_phase_messages"))
        assert v.status == "timeout", v.reason
        assert "run phase" in v.reason
        cost = judge.reference_cost(RELU)
        assert cost is not None and cost.eager_s < 1.0
        pl = v.evidence["phase_limits"]
        policy = LimitPolicy.from_job_options(judge._job_options())  # noqa: SLF001
        assert pl["run_s"] == round(policy.limits(cost).run_s, 3) < 1e3


def test_a_reference_at_fault_in_the_measure_phase_is_named_as_such(tmp_path: Path) -> None:
    # The measure phase runs before any candidate code: its failures say the reference is at fault.
    with Judge(_options(tmp_path, run_timeout_max_s=1.0)) as judge:
        v = judge.evaluate(spec_for_tests("hangs"), OK)
        assert v.status == "timeout", v.reason
        assert "measuring the reference's cost" in v.reason and "exceeded 1 s" in v.reason
        assert "too slow for this evaluator" in v.reason
        assert judge.reference_cost(spec_for_tests("hangs")) is None
        assert v.evidence["phase_limits"]["basis"] == "reference cost not measured yet"
        raised = judge.evaluate(spec_for_tests("raises"), OK)
        assert raised.status == "runtime_error", raised.reason
        assert raised.reason.startswith("the reference raised while its cost was measured, before any candidate")


# -- a spec's import in a validation ----------------------------------------------------------
HANGS = "import threading\nthreading.Event().wait()\n" + RELU
SLOW_IMPORT = "import time\ntime.sleep(1.5)\n" + RELU  # a heavy but finite import (transformers: 2.3 s)


def test_a_validation_starts_in_the_import_phase_under_its_own_limit() -> None:
    policy = LimitPolicy.from_job_options({"spec_import_timeout_s": 7, "compile_timeout_s": 30})
    limits = JobLimits(policy, importing=True)
    assert limits.seconds() == 7.0 and "evaluator.spec_import_timeout_s" in limits.explain()
    assert limits.enter({"phase": "compile"}) and limits.seconds() == 30.0
    assert not limits.enter({"phase": "import"})  # no way back to a phase that restarts a clock
    # An evaluation has no import phase: a forged one is ignored.
    assert not JobLimits(policy).enter({"phase": "import"})
    with pytest.raises(InvalidArgumentError):
        EvalOptions(spec_import_timeout_s=0.0).validate()


def test_a_hanging_import_fails_validation_within_the_import_limit_and_a_slow_one_passes(tmp_path: Path) -> None:
    import time

    with Judge(_options(tmp_path, spec_import_timeout_s=4.0, run_timeout_s=60.0)) as j:
        t0 = time.monotonic()
        check = j.validate_spec(HANGS, "hangs")
        took = time.monotonic() - t0
        assert not check.ok and not check.resource_limited
        assert "import did not return within 4 s" in check.reason and "spec_import_timeout_s" in check.reason
        # The import limit, plus a worker's start: not the 60 s compile + 60 s run limits.
        assert took < 40.0, took
        slow = j.validate_spec(SLOW_IMPORT, "slow_import")
        assert slow.ok, slow.reason
