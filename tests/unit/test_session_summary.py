"""The session summary names a common cause when every candidate failed the same way
before running, instead of only ``best: null``."""

from __future__ import annotations

import io
import json
from contextlib import AsyncExitStack

import pytest

from ke_cli.console import Progress
from ke_cli.main import _print_summary
from ke_search.report import common_failure
from kernelevolve.baseline_best import baseline_best
from kernelevolve.ports.verdict import Verdict
from kernelevolve.v1 import common_pb2 as pb
from tests.unit.fakes import FakeJudge, FakeSynthesizer
from tests.unit.test_orchestration import _run, _system

NAME_ERROR = ("ModelNew(*get_init_inputs()) raised: NameError: name 'Model' is not defined "
              "[at candidate.py line {line} in __init__: super(Model, self).__init__()]")
COMPILE = pb.EVALUATION_STATUS_COMPILE_ERROR


def _node(i: int, status: int, reason: str, evaluated: bool = True) -> pb.Node:
    return pb.Node(node_id=f"r{i}-1", status=status, reason=reason, evaluated=evaluated)


def test_same_construction_failure_everywhere_is_named_once() -> None:
    nodes = [_node(i, COMPILE, NAME_ERROR.format(line=40 + i)) for i in range(3)]
    nodes.append(_node(9, 0, "", evaluated=False))  # not judged yet: does not count
    note = common_failure(nodes)
    assert note.startswith("all 3 candidates failed before running, the same way (compile_error): "
                           "ModelNew(*get_init_inputs()) raised: NameError: name 'Model' is not defined")
    assert "\n" not in note


@pytest.mark.parametrize("nodes", [
    [],
    [_node(1, COMPILE, NAME_ERROR.format(line=4)), _node(2, pb.EVALUATION_STATUS_CORRECT, "ok")],
    [_node(1, COMPILE, NAME_ERROR.format(line=4)),
     _node(2, COMPILE, "candidate module raised on import: ImportError: no module named foo")],
    # Failing while running (a Triton compile error at the first call) is not "before running".
    [_node(1, COMPILE, "triton.CompilationError: at 3:4"), _node(2, COMPILE, "triton.CompilationError: at 3:4")],
])
def test_no_common_failure_when_candidates_differ_or_ran(nodes: list[pb.Node]) -> None:
    assert common_failure(nodes) == ""


class ImportFailingJudge(FakeJudge):
    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, tier: str | None = None) -> Verdict:
        self.evaluated.append(candidate_id)
        return Verdict(status="compile_error", candidate_id=candidate_id,
                       reason=NAME_ERROR.format(line=len(self.evaluated)))


async def test_session_summary_names_the_common_failure() -> None:
    async with AsyncExitStack() as stack:
        _, store, gw = await _system(stack, FakeSynthesizer(), ImportFailingJudge())
        final, _ = await _run(gw, budget=3, max_inflight=1)
        assert final.status == pb.SESSION_STATUS_COMPLETED and not final.best_candidate_id
        assert final.common_failure.startswith("all 3 candidates failed before running")
        summary = json.loads(await store.get(f"{final.artifact_prefix}summary.json"))
        assert summary["common_failure"] == final.common_failure and summary["best_candidate_id"] == ""


@pytest.mark.parametrize(("speedup", "baseline", "line"), [
    (0.8, "eager", "eager PyTorch is already best here: best Triton candidate 0.80x"),
    (0.093, "compile", "torch.compile is already best here: best Triton candidate 0.09x"),
    (0.999, "eager", "eager PyTorch is already best here: best Triton candidate 1.00x"),
    (1.0, "eager", ""),
    (3.2, "compile", ""),
    (None, "eager", ""),  # no correct candidate: nothing was timed
    (0.0, "eager", ""),
])
def test_baseline_best_line(speedup: float | None, baseline: str, line: str) -> None:
    assert baseline_best(speedup, baseline) == line


class SlowJudge(FakeJudge):
    """Every candidate correct and at most 0.75x the baseline."""

    def evaluate(self, spec_source: str, candidate_source: str, candidate_id: str = "",
                 fresh_worker: bool = False, compile_baseline: bool = False, tier: str | None = None) -> Verdict:
        v = super().evaluate(spec_source, candidate_source, candidate_id, fresh_worker, compile_baseline, tier=tier)
        if v.status == "correct":
            v.speedup = min(v.speedup, 0.75) * 0.5
        return v


async def test_session_summary_says_when_the_baseline_is_best() -> None:
    """A search whose best correct candidate is slower than eager says so in its summary
    instead of presenting the slower kernel as the answer."""
    async with AsyncExitStack() as stack:
        _, store, gw = await _system(stack, FakeSynthesizer(), SlowJudge())
        final, _ = await _run(gw, budget=3, max_inflight=1)
        assert final.best_candidate_id and final.best_speedup < 1.0
        summary = json.loads(await store.get(f"{final.artifact_prefix}summary.json"))
        assert summary["verdict"] == baseline_best(final.best_speedup, "eager")
        assert summary["verdict"].startswith("eager PyTorch is already best here: best Triton candidate 0.")
    async with AsyncExitStack() as stack:  # a faster best: no such line
        _, store, gw = await _system(stack, FakeSynthesizer(), FakeJudge())
        final, _ = await _run(gw, budget=3, max_inflight=1)
        summary = json.loads(await store.get(f"{final.artifact_prefix}summary.json"))
        assert final.best_speedup >= 1.0 and summary["verdict"] == ""


@pytest.mark.parametrize(("speedup", "says"), [(0.8, True), (1.4, False)])
def test_cli_summary_prints_the_baseline_line(speedup: float, says: bool) -> None:
    out = io.StringIO()
    best = {"candidate_id": "r1-1", "transformation": "seed", "status": "correct", "speedup": speedup,
            "device": "NVIDIA H200", "path": "best_kernel.py"}
    summary = {"session_id": "s", "status": "completed", "evaluated": 3, "budget": 3, "best": best,
               "common_failure": "", "error": "", "run_dir": "run", "baseline": "eager",
               "verdict": baseline_best(speedup, "eager")}
    _print_summary(Progress(budget=3, out=out), summary)
    line = f"eager PyTorch is already best here: best Triton candidate {speedup:.2f}x."
    assert (line in out.getvalue()) is says
