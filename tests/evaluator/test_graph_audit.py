"""CUDA-graph replays under audit (README "CUDA graph replays"), off CUDA: the static
policy admits exactly the emitted replay and nothing around it; the ledger attributes a
replay's launches to the candidate only for a graph that captured its own kernels (an
eager stand-in for the graph class); the counterfactual pass mirrors captured launches;
the synthesizer's cuda_graph=on candidate is judged correct. The same candidates on a
real graph: test_graph_gpu.py."""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_evaluator.worker import arithmetic_audit, graph_ledger, launch_counter
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.emit import cuda_graph
from kernelevolve import graph_replay
from kernelevolve.static_policy import check_candidate
from tests.kernel_files import import_source
from tests.synthesizer.conftest import example_source, lower_example

from . import graph_candidates as gc
from .sources import example

WHOLE_MODELS = ("model_mlp_layer_list", "model_cnn_head")


@pytest.fixture(scope="module")
def synth() -> OfflineSynthesizer:
    return OfflineSynthesizer()


def test_the_evaluator_admits_the_text_the_synthesizer_emits() -> None:
    assert ast.dump(ast.parse(graph_replay.HELPERS)) == ast.dump(ast.parse(cuda_graph.HELPERS))
    for params in (["x"], ["x", "y", "mask"]):
        sig = "self, " + ", ".join(params)
        assert graph_replay.forward_lines(sig, params) == cuda_graph.forward_wrapper(sig, params)


@pytest.mark.parametrize("name", WHOLE_MODELS)
def test_the_synthesizers_graph_candidates_pass_the_static_policy(synth: OfflineSynthesizer, name: str) -> None:
    on, genome, _ = lower_example(synth, name, {"cuda_graph": "on"})
    assert genome["cuda_graph"] == "on" and "torch.cuda.CUDAGraph()" in on
    report = check_candidate(on)
    assert report.ok, report.reason


GRAPH_CHEATS = {
    # a graph whose replay never sees the new inputs: the answer of the first call, cached
    "stale_replay": (gc.graph_candidate("stale", gc.HONEST, helpers=gc.STALE_HELPERS), "CUDA graph capture"),
    # a runner that captures torch alone after launching the kernel outside the capture
    "torch_only_capture": (gc.graph_candidate("torch only", gc.HONEST, helpers=gc.TORCH_ONLY_RUNNER,
                                              forward=gc.TORCH_ONLY_FORWARD), "CUDA graph capture"),
    # a forward that keeps one more thing than the replay
    "forward_keeps_state": (gc.graph_candidate("state", gc.HONEST).replace(
        "            self._ke_graph_replay = replay\n",
        "            self._ke_graph_replay = replay\n        self.last = x\n"), "mutable state written"),
    # the replay object planted at construction (any object with __call__ would do)
    "planted_replay": (gc.graph_candidate("planted", gc.HONEST).replace(
        "        self.bias = nn.Parameter(torch.randn(features))\n",
        "        self.bias = nn.Parameter(torch.randn(features))\n        self._ke_graph_replay = None\n"),
        "mutable state written"),
    # clones no more: a helper rebound at module level
    "rebound_helper": (gc.graph_candidate("rebound", gc.HONEST) + "\n_clone_outputs = list\n", "CUDA graph capture"),
    # a second capture in the eager forward
    "capture_in_forward": (gc.graph_candidate("second", gc.HONEST.replace(
        "        return y\n", "        torch.cuda.CUDAGraph()\n        return y\n")), "CUDA graph capture"),
    # a stream given to the capture
    "capture_stream": (gc.graph_candidate("stream", gc.HONEST, helpers=graph_replay.HELPERS.replace(
        "torch.cuda.graph(cuda_graph)", "torch.cuda.graph(cuda_graph, stream=torch.cuda.current_stream())")),
        "CUDA graph capture"),
}


def test_the_graph_candidates_of_these_tests_are_what_they_claim() -> None:
    assert check_candidate(gc.graph_candidate("honest", gc.HONEST)).ok
    assert gc.STALE_HELPERS != graph_replay.HELPERS and gc.TORCH_ONLY_RUNNER != graph_replay.HELPERS
    assert gc.TORCH_ONLY_FORWARD != graph_replay.forward_lines("self, x", ["x"])


@pytest.mark.parametrize("name", sorted(GRAPH_CHEATS))
def test_anything_but_the_emitted_replay_is_refused(name: str) -> None:
    source, reason = GRAPH_CHEATS[name]
    report = check_candidate(source)
    assert not report.ok and reason in report.reason, report.reason


@pytest.mark.parametrize("name", WHOLE_MODELS)
def test_graph_candidates_are_judged_correct_off_cuda(synth: OfflineSynthesizer, judge: Judge, name: str) -> None:
    on, _, _ = lower_example(synth, name, {"cuda_graph": "on"})
    v = judge.evaluate(example_source(name), on, candidate_id=f"{name}_graph_on")
    assert v.status == "correct", v.reason
    assert v.evidence["kernel_arithmetic"]["computing"] >= 1
    assert "cuda_graph" not in v.evidence  # off CUDA: the eager path, nothing replayed


@pytest.mark.parametrize(("body", "status", "reason"), [
    (gc.HONEST, "correct", "matches the reference"),
    (gc.LIBRARY_COPY, "rejected", "only move data"),
    (gc.DECOY, "rejected", "does not depend"),
])
def test_graph_candidates_eager_path_keeps_every_check(judge: Judge, body: str, status: str, reason: str) -> None:
    v = judge.evaluate(example("relu_scale_add"), gc.graph_candidate("graph", body), candidate_id=status)
    assert v.status == status and reason in v.reason, v.reason


# -- the ledger, with an eager stand-in for torch.cuda.CUDAGraph ---------------------------
KERNEL = '''
import triton
import triton.language as tl


@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)


def run(x, y):
    double[(1,)](x, y, x.numel(), BLOCK=64)
    return y
'''


class StandInGraph:
    """capture_begin/capture_end around an eager run; replay reruns it (as a graph would
    rerun its kernels) into the same memory."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self.fn, self.args = fn, args

    def capture_begin(self) -> None:
        pass

    def capture_end(self) -> None:
        pass

    def replay(self) -> None:
        self.fn(*self.args)

    def capture(self) -> None:
        self.capture_begin()
        self.fn(*self.args)
        self.capture_end()


graph_ledger.wrap(StandInGraph)


def _module(tmp_path_factory: pytest.TempPathFactory, name: str) -> types.ModuleType:
    module = import_source(Path(tmp_path_factory.mktemp(name)), name, KERNEL)
    launch_counter.install()
    return module


@pytest.fixture(scope="module")
def cand(tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    return _module(tmp_path_factory, "graph_cand")


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    return _module(tmp_path_factory, "graph_other")


def test_a_replay_counts_the_launches_its_capture_recorded(cand: types.ModuleType) -> None:
    x, y = torch.randn(64), torch.empty(64)
    graph = StandInGraph(cand.run, x, y)
    rec = launch_counter.LaunchRecorder(module_name=cand.__name__)
    with launch_counter.recording(rec):
        graph.capture()
    assert rec.total_own() == 0  # recorded into the graph, not a launch of this call
    captured = graph_ledger.captured_by(graph)
    assert captured is not None and captured.own == {"double": 1}
    for calls in (1, 2):
        rec.reset()
        with launch_counter.recording(rec):
            for _ in range(calls):
                graph.replay()
        assert (rec.total_own(), rec.graph_replays, rec.replayed_launches) == (calls, calls, calls)
    torch.testing.assert_close(y, 2 * x)


def test_a_graph_captured_elsewhere_stands_for_no_launch_of_the_candidate(cand: types.ModuleType,
                                                                          other: types.ModuleType) -> None:
    x, y = torch.randn(64), torch.empty(64)
    unrecorded = StandInGraph(cand.run, x, y)
    unrecorded.capture()  # outside any recording: at construction, say
    foreign = StandInGraph(other.run, x, y)
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=other.__name__)):
        foreign.capture()  # another module's kernels
    rec = launch_counter.LaunchRecorder(module_name=cand.__name__)
    with launch_counter.recording(rec):
        unrecorded.replay()
        foreign.replay()
    assert rec.total_own() == 0 and rec.graph_replays == 2 and rec.replayed_launches == 0


def test_the_counterfactual_replaces_what_a_captured_launch_computes(cand: types.ModuleType) -> None:
    """The audit analyses the eager run before the capture; the launches recorded into the
    graph take their counterpart's writes, so the replayed graph loses its computed values too."""
    x, y = torch.randn(64), torch.empty(64)
    graph = StandInGraph(cand.run, x, y)
    audit = arithmetic_audit.ArithmeticAudit()
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=cand.__name__, audit=audit)):
        cand.run(x, y)  # the runner's eager warm-up
        graph.capture()
    eager, captured = audit.launches
    assert eager.computes and captured.captured and not captured.writes
    plan = arithmetic_audit.ArithmeticAudit.counterfactual(audit.launches)
    assert plan.plan is not None and plan.plan[1].writes == eager.writes and plan.plan[1].captured
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=cand.__name__, audit=plan)):
        graph.capture()  # the stand-in executes what it captures: replaced as a graph would be
    assert not torch.allclose(y, 2 * x)


def test_an_economical_pass_mirrors_only_the_launches_it_analysed(cand: types.ModuleType) -> None:
    """The eager run stops being analysed after its first computing launch; the captured
    launches take the writes of their counterparts (none for the one that ran plainly), and
    the replaced values of the first still reach what the graph writes."""
    x, y, z = torch.randn(64), torch.empty(64), torch.empty(64)

    def both() -> None:
        cand.run(x, y)
        cand.run(y, z)

    graph = StandInGraph(both)
    audit = arithmetic_audit.ArithmeticAudit(economy=arithmetic_audit.Economy(computing=1))
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=cand.__name__, audit=audit)):
        both()  # the runner's eager warm-up
        graph.capture()
    first, second, cap1, cap2 = audit.launches
    assert first.computes and second.skipped and cap1.captured and cap2.captured
    plan = arithmetic_audit.ArithmeticAudit.counterfactual(audit.launches)
    assert plan.plan is not None and plan.plan[2].writes == first.writes and not plan.plan[3].writes
    with launch_counter.recording(launch_counter.LaunchRecorder(module_name=cand.__name__, audit=plan)):
        graph.capture()
    assert not torch.allclose(z, 4 * x)
    torch.testing.assert_close(z, 2 * y)  # the second launch ran on the replaced values


class _CapturingModel(torch.nn.Module):
    """The emitted replay's shape with the stand-in graph: the forward eagerly, then again
    under capture; the captured run's outputs are returned (a replay would recompute them)."""

    def __init__(self, cand: types.ModuleType, decoy: bool) -> None:
        super().__init__()
        self.cand, self.decoy = cand, decoy

    def body(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor, out: torch.Tensor) -> None:
        self.cand.double[(1,)](x, y, x.numel(), BLOCK=64)
        self.cand.double[(1,)](y, z, x.numel(), BLOCK=64)
        # the decoy: the library's answer, the kernels' values kept "used" by 0 *
        out.copy_(4 * x + 0.0 * z if self.decoy else z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, z, out = torch.empty_like(x), torch.empty_like(x), torch.empty_like(x)
        self.body(x, y, z, out)  # the runner's eager warm-up
        StandInGraph(self.body, x, y, z, out).capture()
        return out.clone()


@pytest.mark.parametrize(("decoy", "audit"), [(False, "economical: 2 of 4 launches analysed"),
                                              (True, "full after the economical pass")])
def test_a_graph_candidates_economical_pass_takes_a_counterfactual_pass(cand: types.ModuleType, decoy: bool,
                                                                        audit: str) -> None:
    """The captured launches ran plainly in the economical pass (its output is the honest
    one): a counterfactual pass mirrors the found launches' replacements into the capture
    and decides the pass; a decoy still goes to the full audit, which rejects it."""
    from ke_evaluator.worker import defenses, loading
    from kernelevolve.ports.verdict import Verdict

    x = torch.randn(64)
    spec = loading.LoadedSpec(sha="", name="graph", module=types.ModuleType("graph_spec"))
    v = Verdict(status="correct", reason="")
    rec = launch_counter.LaunchRecorder(module_name=cand.__name__)

    def judge() -> None:
        defenses.kernel_arithmetic(lambda m, inputs: m(*inputs), lambda inputs: None,
                                   lambda: _CapturingModel(cand, decoy), rec, [x], 4 * x, spec, "cpu", v,
                                   economy=arithmetic_audit.Economy())

    if decoy:
        with pytest.raises(defenses.Outcome, match="do not reach the output"):
            judge()
    else:
        judge()
        assert v.evidence["kernel_arithmetic"]["computed_values_reach_output"] is True
    assert v.evidence["kernel_arithmetic"]["audit"].startswith(audit), v.evidence["kernel_arithmetic"]
