"""The compile phase's dry run (``worker/precompile.py``): a second import of the candidate,
built and called on fake tensors (no data) with every own launch a Triton warm-up,
so its kernels compile side by side before the first judged call.

On CPU the interpreter compiles nothing and ``auto`` skips the dry run; ``on`` runs its
logic there (the interpreter's warm-up does nothing): which kernels it reaches, that the
judged module is never touched, that a dry run that stops (a value read on fake tensors)
or is skipped (autotuned kernels) changes no verdict, because the first real call still
happens inside the compile phase and is what is judged."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ke_evaluator.judge import EvalOptions, Judge, WorkerPoolOptions
from ke_evaluator.worker import launch_counter, precompile
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest

from .sources import EXAMPLES, candidate, example

_TWO_KERNELS = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def k_add(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1.0, mask=offs < n)


@triton.jit
def k_scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2.0, mask=offs < n)


@triton.jit
def k_never(x_ptr):
    pass


class ModelNew(nn.Module):
    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        y = torch.empty_like(x)
        for _ in range(self.steps):
            k_add[(1,)](x, y, x.numel(), BLOCK=64)
            x = y
        {VALUE_READ}
        out = torch.empty_like(y)
        k_scale[(1,)](y, out, y.numel(), BLOCK=64)
        return out * self.w.sum()
'''


def _source(value_read: str = "") -> str:
    return _TWO_KERNELS.replace("{VALUE_READ}", value_read or "pass")


def _nothing() -> contextlib.AbstractContextManager[Any]:
    return contextlib.nullcontext()


@pytest.fixture
def interpreted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kernels defined from here on are the interpreter's (no device here), launches counted."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    launch_counter.install()


def _dry(source: str, tmp_path: Path, name: str = "_ke_dry_test", inputs: list[Any] | None = None
         ) -> precompile.DryRun:
    return precompile.dry_run(source, name, str(tmp_path), "ModelNew", [3], inputs or [torch.randn(50)],
                              device=torch.device("cpu"), accelerated=False, call=lambda m, xs: m(*xs),
                              unlocked=_nothing, paused=_nothing)


def test_the_dry_run_warms_every_launch_of_the_candidates_own_kernels(interpreted: None, tmp_path: Path) -> None:
    result = _dry(_source(), tmp_path)
    assert result.status == "done", result
    assert result.kernels == ["k_add", "k_scale"]  # k_never is never launched: nothing to compile
    assert result.warmed == 3 + 1  # every launch, the loop's three included
    assert "_ke_dry_test" not in sys.modules  # the dry run's module is gone after it


def test_a_value_read_on_fake_tensors_stops_the_dry_run_and_keeps_what_it_reached(
        interpreted: None, tmp_path: Path) -> None:
    result = _dry(_source("print(float(y.sum()))"), tmp_path)
    assert result.status == "stopped" and result.reason, result
    assert result.kernels == ["k_add"]  # submitted before the stop


def test_autotuned_kernels_get_no_dry_run(interpreted: None, tmp_path: Path) -> None:
    result = _dry(candidate("ok_autotuned_heuristics"), tmp_path, inputs=[torch.randn(4, 16)])
    assert result.status == "skipped" and "autotuned" in result.reason, result


def test_a_candidate_that_does_not_import_is_left_to_the_judged_import(interpreted: None, tmp_path: Path) -> None:
    result = _dry("raise ValueError('broken at import')", tmp_path)
    assert result.status == "stopped" and "broken at import" in result.reason


def test_the_dry_run_never_launches_and_refuses_foreign_kernels(interpreted: None) -> None:
    """In warm-up mode an own launch compiles without running (the output keeps its NaNs),
    and a launch of any other module's kernel raises (its tensors may be meta)."""
    import triton
    import triton.language as tl

    @triton.jit
    def k_fill(y_ptr, BLOCK: tl.constexpr):
        tl.store(y_ptr + tl.arange(0, BLOCK), tl.full((BLOCK,), 1.0, tl.float32))

    y = torch.full((8,), float("nan"))
    own = launch_counter.LaunchRecorder(module_name=k_fill.fn.__module__, warm_up=True)
    with launch_counter.recording(own):
        k_fill[(1,)](y, BLOCK=8)
    assert own.warmed == {"k_fill": 1} and torch.isnan(y).all()
    other = launch_counter.LaunchRecorder(module_name="_ke_candidate_other", warm_up=True)
    with launch_counter.recording(other), pytest.raises(RuntimeError, match="not a kernel of the candidate"):
        k_fill[(1,)](y, BLOCK=8)


def test_the_mode_decides_on_cpu() -> None:
    assert precompile.wanted("auto", accelerated=False) == "interpreter: nothing to compile"
    assert precompile.wanted("auto", accelerated=True) == ""
    assert precompile.wanted("on", accelerated=False) == ""
    assert precompile.wanted("off", accelerated=True) == "off"


# --- the Judge: the dry run inside the compile phase changes no verdict ---

@pytest.fixture(scope="module")
def dry_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    opts = EvalOptions(device="cpu", correctness_trials=2, time_candidates=False, compile_timeout_s=120.0,
                       run_timeout_s=120.0, precompile="on",
                       pool=WorkerPoolOptions(reuse_worker_after_failure=True),
                       scratch_dir=str(tmp_path_factory.mktemp("precompile")))
    with Judge(opts) as judge:
        yield judge


_STOPS_ON_FAKES = candidate("ok_relu_scale_add").replace(
    "        x = x.contiguous()\n",
    "        x = x.contiguous()\n        if float(x.abs().sum()) < 0:  # reads a value: a dry run stops here\n"
    "            raise RuntimeError('never')\n", 1)


def test_a_whole_model_is_correct_with_its_kernels_warmed_first(dry_judge: Judge) -> None:
    src = (EXAMPLES / "model_lstm_cell_loop.py").read_text()
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="lstm_cells", count=1))
    verdict = dry_judge.evaluate(src, prop.source, "lstm_cells")
    assert verdict.status == "correct", verdict.reason
    dry = verdict.evidence["precompile"]
    assert dry["status"] == "done", dry
    # the cell loop's projection and step kernels (the step warmed at every one of its 9
    # steps) and the head's matmul: the kernels the first call launches
    assert set(dry["kernels"]) == set(verdict.evidence["kernel_launches"]), (dry, verdict.evidence["kernel_launches"])
    assert dry["warmed_launches"] == sum(verdict.evidence["kernel_launches"].values())


@pytest.mark.parametrize(("name", "source", "dry_status"), [
    ("stops", _STOPS_ON_FAKES, "stopped"), ("autotuned", candidate("ok_autotuned_heuristics"), "skipped")])
def test_a_dry_run_that_stops_or_is_skipped_changes_no_verdict(dry_judge: Judge, name: str, source: str,
                                                                dry_status: str) -> None:
    verdict = dry_judge.evaluate(example("relu_scale_add"), source, name)
    assert verdict.status == "correct", verdict.reason
    assert verdict.evidence["precompile"]["status"] == dry_status, verdict.evidence["precompile"]


def test_an_exit_in_the_dry_run_is_judged_at_the_first_call(dry_judge: Judge) -> None:
    """``SystemExit`` from forward is caught in the dry run; the judged call raises it again
    and the worker ends as it does without a dry run (test_adversarial: crashed, code 3)."""
    verdict = dry_judge.evaluate(example("relu_scale_add"), candidate("exit_in_forward"), "exits")
    assert verdict.status == "crashed" and "code 3" in verdict.reason, verdict.reason
