"""Fixtures for the evaluator tests: judges on CPU (Triton interpreter) with small budgets."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ke_evaluator.judge import EvalOptions, Judge, WorkerPoolOptions

from .sources import PLANTED_SECRETS


def _fast_options(**kw: object) -> EvalOptions:
    base = dict(device="cpu", correctness_trials=2, time_candidates=False, compile_timeout_s=60.0,
                run_timeout_s=60.0, pool=WorkerPoolOptions(reuse_worker_after_failure=True))
    base.update(kw)
    return EvalOptions(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """Full policy; keeps its worker after incorrect/compile/runtime verdicts to save time."""
    with Judge(_fast_options(scratch_dir=str(tmp_path_factory.mktemp("judge")))) as j:
        yield j


@pytest.fixture(scope="session")
def full_audit_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """Full policy with the arithmetic audit's economy off: every launch analysed."""
    with Judge(_fast_options(audit_economy=False, scratch_dir=str(tmp_path_factory.mktemp("full_audit")))) as j:
        yield j


@pytest.fixture(scope="session")
def runtime_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """Static policy off: exercises the runtime defenses alone (defense in depth)."""
    with Judge(_fast_options(enforce_static_policy=False,
                             scratch_dir=str(tmp_path_factory.mktemp("runtime")))) as j:
        j.warm_up()
        yield j


@pytest.fixture
def judge_with_planted_secrets(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Judge]:  # noqa: ANN001
    """A runtime-only judge whose worker is started while secrets sit in our environment
    (planted for this test only: monkeypatch restores the environment afterwards)."""
    for name, value in PLANTED_SECRETS.items():
        monkeypatch.setenv(name, value)
    with Judge(_fast_options(enforce_static_policy=False, scratch_dir=str(tmp_path))) as j:
        j.warm_up()
        yield j


@pytest.fixture(scope="session")
def timeout_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    with Judge(_fast_options(compile_timeout_s=5.0, run_timeout_s=5.0,
                             scratch_dir=str(tmp_path_factory.mktemp("timeout")))) as j:
        yield j
