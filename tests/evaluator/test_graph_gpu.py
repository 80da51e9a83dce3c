"""CUDA-graph replays judged on a real graph (README "CUDA graph replays"): the
synthesizer's cuda_graph=on candidates are correct, their replays attributed to their own
kernels; a graph around a library forward, a decoy, a stale replay and a capture of torch
alone are not. Skipped without a GPU; the CPU side of the same audit: test_graph_audit.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ke_evaluator.judge import EvalOptions, Judge, TimingOptions
from ke_synthesizer.offline import OfflineSynthesizer
from tests.synthesizer.conftest import example_source, lower_example

from . import graph_candidates as gc
from .sources import example

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

RELU = "relu_scale_add"


def _judge(tmp_path_factory: pytest.TempPathFactory, name: str, **kw: object) -> Iterator[Judge]:
    opts = EvalOptions(device="cuda", correctness_trials=5, timing=TimingOptions(max_trials=20),
                       scratch_dir=str(tmp_path_factory.mktemp(name)), **kw)  # type: ignore[arg-type]
    with Judge(opts) as judge:
        yield judge


@pytest.fixture(scope="module")
def gpu_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    yield from _judge(tmp_path_factory, "graph_gpu")


@pytest.fixture(scope="module")
def gpu_runtime_judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judge]:
    yield from _judge(tmp_path_factory, "graph_gpu_runtime", enforce_static_policy=False)


@pytest.mark.parametrize("name", ["model_mlp_layer_list", "model_cnn_head"])
def test_the_synthesizers_graph_candidates_are_correct_and_timed(gpu_judge: Judge, name: str) -> None:
    on, _, _ = lower_example(OfflineSynthesizer(), name, {"cuda_graph": "on"})
    v = gpu_judge.evaluate(example_source(name), on, candidate_id=f"{name}_graph_on")
    assert v.status == "correct", v.reason
    graph = v.evidence["cuda_graph"]
    assert graph["replays"] >= 5 and graph["replayed_launches"] >= graph["replays"]
    assert v.evidence["kernel_arithmetic"]["computing"] >= 1
    assert v.evidence["kernel_dependency"].startswith("output changes")
    assert v.candidate_timing is not None and v.speedup > 0


def test_an_honest_graph_candidate_is_correct(gpu_judge: Judge) -> None:
    v = gpu_judge.evaluate(example(RELU), gc.graph_candidate("honest", gc.HONEST), candidate_id="graph_honest")
    assert v.status == "correct", v.reason
    assert v.evidence["cuda_graph"]["replays"] >= 5


@pytest.mark.parametrize(("body", "reasons"), [
    (gc.LIBRARY_COPY, ("only move data",)),  # a capture that hides a library forward behind a copy
    # a kernel captured next to the torch forward that answers: on an H100 the arithmetic
    # audit's replacement pass names it first ("do not reach the output"), the dependency
    # check would too ("does not depend"); either is the same rejection
    (gc.DECOY, ("does not depend", "do not reach the output")),
])
def test_graphs_around_library_forwards_are_rejected(gpu_judge: Judge, body: str, reasons: tuple[str, ...]) -> None:
    v = gpu_judge.evaluate(example(RELU), gc.graph_candidate("cheat", body), candidate_id=reasons[0])
    assert v.status == "rejected" and any(r in v.reason for r in reasons), v.reason


def test_a_stale_replay_is_caught_with_and_without_the_static_policy(gpu_judge: Judge,
                                                                       gpu_runtime_judge: Judge) -> None:
    source = gc.graph_candidate("stale", gc.HONEST, helpers=gc.STALE_HELPERS)
    v = gpu_judge.evaluate(example(RELU), source, candidate_id="stale")
    assert v.status == "rejected" and "CUDA graph capture" in v.reason, v.reason
    # the runtime alone: trial 1 writes new values into trial 0's buffers; the graph
    # replays the first call's answer
    v = gpu_runtime_judge.evaluate(example(RELU), source, candidate_id="stale_runtime")
    assert v.status == "incorrect", v.reason


def test_a_graph_of_torch_alone_counts_no_launch(gpu_runtime_judge: Judge) -> None:
    source = gc.graph_candidate("torch only", gc.HONEST, helpers=gc.TORCH_ONLY_RUNNER, forward=gc.TORCH_ONLY_FORWARD)
    v = gpu_runtime_judge.evaluate(example(RELU), source, candidate_id="torch_only")
    assert v.status == "rejected", v.reason
    assert "CUDA graph replay(s) of no kernel of its own" in v.reason
