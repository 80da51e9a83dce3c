"""The Judge's options come from the typed settings through one function, for the service and
the CLI alike: what YAML and ``KE_EVALUATOR_*`` set is what the judge runs with."""

from __future__ import annotations

from contextlib import AsyncExitStack
from pathlib import Path

import pytest

from ke_evaluator.app import make_judge
from ke_evaluator.judge import EvalOptions, Judge, options_from_settings, resolve_device, resolve_hardware_kind
from kernelevolve.config import EvaluatorSettings, load_settings
from kernelevolve.errors import InvalidArgumentError


def _settings(tmp_path: Path) -> EvaluatorSettings:
    cfg = tmp_path / "ke.yaml"
    cfg.write_text("evaluator:\n  hardware_kind: cpu\n  correctness_trials: 3\n  parallel_workers: 2\n"
                   "  timing:\n    max_trials: 40\n  cache:\n    seed_rotation_jobs: 4\n")
    env = {"KE_EVALUATOR_TIMING_MAX_TRIALS": "7", "KE_EVALUATOR_SANDBOX_FILE_SIZE_LIMIT_BYTES": "1048576",
           "KE_EVALUATOR_POOL_MAX_JOBS_PER_WORKER": "9", "KE_EVALUATOR_SCRATCH_DIR": str(tmp_path / "scratch")}
    return load_settings(cfg, env=env).evaluator


async def test_the_service_judge_carries_the_settings(tmp_path: Path) -> None:
    async with AsyncExitStack() as stack:
        judge = make_judge(_settings(tmp_path), "cpu", stack)
        assert isinstance(judge, Judge)
        o = judge.opts
        assert (judge.device, o.correctness_trials, o.parallel_workers) == ("cpu", 3, 2)
        assert o.timing.max_trials == 7  # env beats YAML
        assert o.cache.seed_rotation_jobs == 4
        assert o.sandbox.file_size_limit_bytes == 2**20 and o.pool.max_jobs_per_worker == 9
        assert o.scratch_dir == str(tmp_path / "scratch")
        job = judge._job_options()  # noqa: SLF001 - what the worker receives is what is under test
        assert (job["max_timing_trials"], job["min_timing_trials"], job["correctness_trials"]) == (7, 3, 3)


def test_the_cli_override_keeps_every_other_setting(tmp_path: Path) -> None:
    opts = options_from_settings(_settings(tmp_path), correctness_trials=1)
    assert opts.correctness_trials == 1
    assert opts.parallel_workers == 2 and opts.timing.max_trials == 7 and opts.scratch_dir


def test_default_settings_give_default_options() -> None:
    assert options_from_settings(EvaluatorSettings()) == EvalOptions()


def test_auto_is_resolved_in_one_place(monkeypatch: pytest.MonkeyPatch) -> None:
    from ke_evaluator.judge import options

    for visible, kind, device in ((True, "nvidia", "cuda"), (False, "cpu", "cpu")):
        monkeypatch.setattr(options, "cuda_available", lambda v=visible: v)
        assert resolve_hardware_kind("auto") == kind
        assert resolve_device("auto") == device
        assert options_from_settings(EvaluatorSettings()).device == "auto"
    assert resolve_hardware_kind("nvidia") == "nvidia"  # explicit kinds are kept
    with pytest.raises(InvalidArgumentError):
        resolve_device("cuda")  # cuda_available is False here
    assert options_from_settings(EvaluatorSettings(hardware_kind="nvidia")).device == "cuda"
    assert options_from_settings(EvaluatorSettings(hardware_kind="cpu")).device == "cpu"
    assert options_from_settings(EvaluatorSettings(hardware_kind="pool-a")).device == "cpu"  # a pool label
