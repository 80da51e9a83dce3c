"""One contract suite for the judge port (``kernelevolve.ports.judge``), run against the
real ``Judge`` (sandboxed workers, Triton interpreter on CPU) and the test double."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from ke_evaluator.judge import EvalOptions, Judge, TimingOptions
from kernelevolve.ports.judge import JudgePort
from kernelevolve.ports.verdict import STATUSES
from tests.unit.fakes import FakeJudge, FakeSynthesizer

SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(5, 67)]


def get_init_inputs():
    return []
'''

BAD_SPEC = SPEC.replace("return [torch.randn(5, 67)]", "raise ValueError('no inputs today')")

TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu2(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0) * {factor}, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _relu2[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
'''


@dataclass
class Case:
    judge: JudgePort
    good: str
    bad: str


@pytest.fixture(scope="module", params=["judge", "double"])
def case(request: pytest.FixtureRequest) -> Iterator[Case]:
    if request.param == "double":
        good_synth, bad_synth = FakeSynthesizer().propose, FakeSynthesizer(bad_seeds=1).propose
        from kernelevolve.ports.synthesis import ProposalRequest

        req = ProposalRequest(spec_source=SPEC, spec_name="relu2", count=1)
        yield Case(FakeJudge(), good_synth(req)[0].source, bad_synth(req)[0].source)
        return
    opts = EvalOptions(device="cpu", correctness_trials=2, timing=TimingOptions(max_trials=3, input_sets=1),
                       profile_library_time=False)
    with Judge(opts) as judge:
        yield Case(judge, TRITON.format(factor="2.0"), TRITON.format(factor="3.0"))


def test_a_runnable_spec_validates(case: Case) -> None:
    check = case.judge.validate_spec(SPEC, "relu2")
    assert check.ok, check.reason


def test_a_broken_spec_is_refused_with_a_reason_not_an_exception(case: Case) -> None:
    check = case.judge.validate_spec(BAD_SPEC if isinstance(case.judge, Judge) else "def get_inputs(:", "relu2")
    assert not check.ok and check.reason


def test_a_correct_candidate_is_correct_with_a_speedup(case: Case) -> None:
    v = case.judge.evaluate(SPEC, case.good, "c-good")
    assert v.status == "correct", v.reason
    assert v.speedup > 0 and v.candidate_id == "c-good" and v.is_correct


def test_a_wrong_candidate_is_a_verdict_with_no_fitness(case: Case) -> None:
    v = case.judge.evaluate(SPEC, case.bad, "c-bad")
    assert v.status in STATUSES and v.status != "correct"
    assert v.reason and not v.is_correct


def test_evaluate_many_keeps_the_order_of_its_jobs(case: Case) -> None:
    verdicts = case.judge.evaluate_many([(SPEC, case.bad, "m-bad"), (SPEC, case.good, "m-good")])
    assert [v.candidate_id for v in verdicts] == ["m-bad", "m-good"]
    assert [v.status == "correct" for v in verdicts] == [False, True]


def test_compile_baseline_is_timed_when_asked_or_says_why_not(case: Case) -> None:
    """A session's ``--baseline compile``: the judge times torch.compile of the reference in
    the same worker, or (CPU: the interpreter's timing says nothing) says why not."""
    v = case.judge.evaluate(SPEC, case.good, "c-compile", compile_baseline=True)
    assert v.status == "correct", v.reason
    note = str(v.evidence.get("compile_baseline", ""))
    assert note  # timed, or skipped with a reason
    if v.speedup_vs_compile > 0:
        assert v.compile_baseline_timing is not None
    else:
        assert note.startswith("skipped")

