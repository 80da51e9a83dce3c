"""Tiered evaluation (worker/stages): the stages each tier runs and their order, the
driver's laps, a screen's verdict (one input set against the cached eager output, the
baseline timing of an earlier job), the defenses that stay on the screen, and what only
the full protocol catches (why a screened verdict is provisional)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch

from ke_evaluator.judge import EvalOptions, Judge, ReferenceCacheOptions, TimingOptions, WorkerPoolOptions
from ke_evaluator.worker import stages
from ke_evaluator.worker.defenses import Outcome
from ke_evaluator.worker.options import JobOptions
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.ports.verdict import Verdict

from .sources import candidate, example

RELU = "relu_scale_add"
FULL = ["load", "compile", "correctness", "integrity", "flops", "library_profile", "timing", "diagnosis"]
SCREEN = ["load", "compile", "screen", "flops", "timing", "diagnosis"]


# -- the pipeline with fake stages and a fake device ------------------------------------------

class _FakeMemory:
    def __init__(self) -> None:
        self.marks: list[str] = []

    def mark(self, name: str) -> None:
        self.marks.append(name)


class _FakeHarness:
    """Only what the driver touches: the memory marks of the laps."""

    def __init__(self) -> None:
        self._mem = _FakeMemory()
        self.device = torch.device("cpu")


def _ctx(tier: str) -> stages.JobContext:
    return stages.JobContext(ev=_FakeHarness(), job={}, opts=JobOptions(tier=tier),  # type: ignore[arg-type]
                             v=Verdict(status="correct", reason=""), phase=lambda name, cost=None: None)


def _fake_pipeline(calls: list[str], fail_at: str = "") -> tuple[stages.Stage, ...]:
    def make(stage: stages.Stage) -> stages.Stage:
        def run(ctx: stages.JobContext) -> dict[str, Any]:
            calls.append(stage.name)
            if stage.name == fail_at:
                raise Outcome("incorrect", f"fails at {stage.name}")
            return {f"seen_{stage.name}": True}
        return stages.Stage(stage.name, run, stage.phase, tiers=stage.tiers, lap=stage.lap)
    return tuple(make(s) for s in stages.PIPELINE)


def test_each_tier_runs_its_stages_in_order() -> None:
    assert [s.name for s in stages.for_tier("full")] == FULL
    assert [s.name for s in stages.for_tier("screen")] == SCREEN
    assert [s.name for s in stages.PIPELINE] == FULL[:2] + ["screen"] + FULL[2:]
    with pytest.raises(ValueError, match="unknown tier"):
        stages.for_tier("quick")


@pytest.mark.parametrize(("tier", "expected"), [("full", FULL), ("screen", SCREEN)])
def test_the_driver_runs_a_tier_laps_it_and_says_so(tier: str, expected: list[str]) -> None:
    calls: list[str] = []
    ctx = _ctx(tier)
    stages.run_pipeline(ctx, _fake_pipeline(calls))
    assert calls == expected
    v = ctx.v
    assert v.tier == tier
    assert v.evidence["stages"] == {"tier": tier, "ran": expected,
                                    "skipped": [s.name for s in stages.PIPELINE if s.name not in expected]}
    assert all(v.evidence[f"seen_{name}"] for name in expected)  # each stage's evidence merged
    # a lap per stage that closes one (load's time counts toward the next; diagnosis has none)
    lapped = [n for n in expected if n not in ("load", "diagnosis")]
    assert list(v.evidence["stage_s"]) == lapped and ctx.ev._mem.marks == lapped  # type: ignore[attr-defined]
    assert all(t >= 0 for t in v.evidence["stage_s"].values())


@pytest.mark.parametrize(("tier", "fail_at"), [("full", "correctness"), ("full", "integrity"),
                                               ("screen", "screen"), ("screen", "compile")])
def test_an_outcome_ends_the_pipeline_where_it_is_raised(tier: str, fail_at: str) -> None:
    calls: list[str] = []
    with pytest.raises(Outcome, match=f"fails at {fail_at}"):
        stages.run_pipeline(_ctx(tier), _fake_pipeline(calls, fail_at))
    order = FULL if tier == "full" else SCREEN
    assert calls == order[:order.index(fail_at) + 1]


# -- real jobs (CPU, Triton interpreter) ------------------------------------------------------

def _opts(scratch: str, **kw: object) -> EvalOptions:
    base: dict[str, object] = dict(
        device="cpu", correctness_trials=3, time_candidates=True, enforce_static_policy=False,
        timing=TimingOptions(min_trials=2, max_trials=3, input_sets=2, budget_s=5.0),
        cache=ReferenceCacheOptions(seed_rotation_jobs=1000), pool=WorkerPoolOptions(reuse_worker_after_failure=True),
        scratch_dir=scratch)
    base.update(kw)
    return EvalOptions(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tier_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """Runtime defenses alone (no static policy), one worker, one spec's cache."""
    with Judge(_opts(str(tmp_path_factory.mktemp("tiers")))) as j:
        yield j


def test_a_screen_reuses_the_session_work_of_earlier_jobs(tier_judge: Judge) -> None:
    spec = example(RELU)
    full = tier_judge.evaluate(spec, candidate("ok_relu_scale_add"), "full")
    screen = tier_judge.evaluate(spec, candidate("ok_autotuned_heuristics"), "screen", tier="screen")
    assert full.status == screen.status == "correct", (full.reason, screen.reason)
    assert full.tier == "full" and full.evidence["stages"]["ran"] == FULL
    assert full.evidence["timing"]["baseline"].startswith("timed in this job")
    assert screen.tier == "screen" and screen.evidence["stages"]["ran"] == SCREEN
    assert screen.reason.startswith("screened (provisional")
    assert screen.correctness is not None and screen.correctness.trials == 1
    assert screen.evidence["correctness_sets"] == 1 and sum(screen.evidence["kernel_launches"].values()) >= 1
    # the session's inputs, eager output and baseline timing, not made again
    cache = screen.evidence["reference_cache"]
    assert cache["input_sets_generated"] == 0 and cache["reference_outputs"] == "cached", cache
    timing = screen.evidence["timing"]
    assert timing["baseline"].startswith("timed by an earlier job") and timing["input_sets"] == 1
    assert screen.baseline_timing is not None and full.baseline_timing is not None
    assert screen.baseline_timing.median_ms == full.baseline_timing.median_ms
    assert screen.candidate_timing is not None and screen.candidate_timing.trials <= 3
    assert screen.speedup > 0
    assert "integrity" in screen.evidence["stages"]["skipped"] and "kernel_dependency" not in screen.evidence
    assert set(screen.evidence["stage_s"]) >= {"compile", "screen", "timing"}


@pytest.mark.parametrize(("name", "status", "reason"), [
    ("wrong_math", "incorrect", "mismatch"),
    ("wrong_shape", "incorrect", "shape"),
    ("mutate_input", "incorrect", "modified in place"),
    ("stale_memory_empty", "incorrect", "(trial 0)"),
    ("lazy_tensor_subclass", "incorrect", "plain torch.Tensor"),
    ("thread_spawn", "rejected", "started threads"),
    ("monkeypatch_timer", "rejected", "time.perf_counter"),
    ("tf32_flip", "rejected", "allow_tf32"),
    ("global_forward_hook", "rejected", "global_module_hooks"),
    ("cache_tamper", "rejected", "cached inputs or reference changed"),
])
def test_the_screen_keeps_the_defenses_that_see_every_candidate(tier_judge: Judge, name: str, status: str,
                                                                 reason: str) -> None:
    v = tier_judge.evaluate(example(RELU), candidate(name), name, tier="screen")
    assert (v.status, v.tier) == (status, "screen"), v.reason
    assert reason in v.reason
    assert v.speedup == 0.0


def test_the_screen_counts_launches(tier_judge: Judge) -> None:
    no_kernel = candidate("ok_relu_scale_add").replace(
        "_relu_scale_add[(triton.cdiv(n, block),)](x, self.bias, y, n, x.shape[-1], BLOCK=block)",
        "y = torch.relu(x) * 2.5 + self.bias")
    assert no_kernel != candidate("ok_relu_scale_add")
    v = tier_judge.evaluate(example(RELU), no_kernel, "no-kernel", tier="screen")
    assert v.status == "rejected" and "no Triton kernel defined by the candidate launched" in v.reason


@pytest.mark.parametrize(("name", "reason"), [("hardcoded_shape", "extra shape set"),
                                              ("numpy_compute", "does not depend")])
def test_what_only_the_full_protocol_catches(tier_judge: Judge, name: str, reason: str) -> None:
    """Why a screen is provisional: these pass one input set and fail the full verdict."""
    screened = tier_judge.evaluate(example(RELU), candidate(name), name, tier="screen")
    full = tier_judge.evaluate(example(RELU), candidate(name), name, tier="full")
    assert screened.status == "correct" and screened.tier == "screen", screened.reason
    assert full.status != "correct" and full.tier == "full" and reason in full.reason


def test_the_static_policy_judges_every_tier(tmp_path) -> None:  # noqa: ANN001
    with Judge(_opts(str(tmp_path), enforce_static_policy=True, time_candidates=False)) as judge:
        v = judge.evaluate(example(RELU), candidate("inspect_frame"), "x", tier="screen")
        assert (v.status, v.tier) == ("rejected", "screen") and "frame/global inspection" in v.reason
        with pytest.raises(InvalidArgumentError, match="tier"):
            judge.evaluate(example(RELU), candidate("ok_relu_scale_add"), tier="quick")
    with pytest.raises(InvalidArgumentError, match="tier"):
        Judge(EvalOptions(device="cpu", tier="quick"))


def test_screens_keep_the_sessions_seed_and_full_jobs_rotate_it() -> None:
    """A screen does not move the seed rotation on: the screens of a session read the input
    sets and references its worker holds; full jobs rotate as before."""
    sha = "spec-sha"
    judge = Judge(EvalOptions(device="cpu", cache=ReferenceCacheOptions(seed_rotation_jobs=2)))
    try:
        slot = judge._pool.slots[0]
        screens = [judge._seed_options(sha, slot, advance=False) for _ in range(5)]
        fulls = [judge._seed_options(sha, slot) for _ in range(3)]
        later = judge._seed_options(sha, slot, advance=False)
    finally:
        judge.close()
    assert {s["seed"] for s in screens} == {fulls[0]["seed"]} == {fulls[1]["seed"]}
    assert fulls[2]["seed"] != fulls[0]["seed"] and later["seed"] == fulls[2]["seed"]
    assert all(s["seed_shared"] for s in [*screens, *fulls])
