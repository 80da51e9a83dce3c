"""Fixtures for the evaluator tests: judges on CPU (Triton interpreter) with small budgets."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from ke_evaluator.judge import EvalOptions, Judge

from .sources import PLANTED_SECRETS


def _fast_options(**kw: object) -> EvalOptions:
    base = dict(device="cpu", correctness_trials=2, time_candidates=False, compile_timeout_s=60.0,
                run_timeout_s=60.0, reuse_worker_after_failure=True)
    base.update(kw)
    return EvalOptions(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """Full policy; keeps its worker after incorrect/compile/runtime verdicts to save time."""
    with Judge(_fast_options(scratch_dir=str(tmp_path_factory.mktemp("judge")))) as j:
        yield j


@pytest.fixture(scope="session")
def runtime_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    """Static policy off: exercises the runtime defenses alone (defense in depth)."""
    saved = {k: os.environ.get(k) for k in PLANTED_SECRETS}
    os.environ.update(PLANTED_SECRETS)
    try:
        with Judge(_fast_options(enforce_static_policy=False,
                                 scratch_dir=str(tmp_path_factory.mktemp("runtime")))) as j:
            j.warm_up()  # the worker is spawned now, with the secrets present in our env
            yield j
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def timeout_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    with Judge(_fast_options(compile_timeout_s=5.0, run_timeout_s=5.0,
                             scratch_dir=str(tmp_path_factory.mktemp("timeout")))) as j:
        yield j
