"""The ``cuda_graph`` knob: offered for whole models (many kernels) only; ``off`` leaves
the candidate unchanged; ``on`` replays one captured forward per input signature and
returns clones of its static outputs. Off CUDA the candidate takes the eager path; the
replay logic itself runs here with an eager stand-in for the CUDA graph (a "replay"
reruns the captured function into the same static outputs, as a graph would)."""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

import pytest
import torch

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.emit import cuda_graph
from kernelevolve.ports.synthesis import ProposalRequest
from tests.kernel_files import import_source
from tests.synthesizer.conftest import example_source, lower_example

WHOLE_MODEL = "model_mlp_layer_list"


def _reference(name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    exec(compile(example_source(name), name, "exec"), module.__dict__)  # noqa: S102 - our own example
    return module


def test_the_knob_is_offered_for_whole_models_only(synth: OfflineSynthesizer, monkeypatch: pytest.MonkeyPatch) -> None:
    # searched by default (the evaluator audits a replay); unsearched, only when a genome names it
    assert ("cuda_graph", ["off", "on"]) in synth.space(example_source(WHOLE_MODEL), WHOLE_MODEL)
    monkeypatch.setattr(cuda_graph, "SEARCHED", False)
    assert all(key != "cuda_graph" for key, _ in synth.space(example_source(WHOLE_MODEL), WHOLE_MODEL))
    assert ("cuda_graph", ["off", "on"]) in synth.space(example_source(WHOLE_MODEL), WHOLE_MODEL, {"cuda_graph": "off"})
    assert all(key != "cuda_graph" for key, _ in synth.space(example_source("relu_scale_add"), "relu_scale_add"))


@pytest.mark.parametrize(("name", "offered"), [
    # two groups, but the two-layer LSTM launches a projection and a recurrence per layer
    ("model_lstm_classifier", True),
    # one layer, one direction: the projection and the recurrence, two launches
    ("model_gru_encoder", False),
])
def test_a_recurrent_layer_counts_its_launches(synth: OfflineSynthesizer, name: str, offered: bool) -> None:
    keys = dict(synth.space(example_source(name), name))
    assert ("cuda_graph" in keys) is offered, keys


@pytest.mark.parametrize("name", [WHOLE_MODEL, "model_lstm_classifier"])
def test_the_replay_is_the_first_seed_variant(synth: OfflineSynthesizer, name: str) -> None:
    """After the default lowering, the same lowering replayed as one CUDA graph: a budget's
    first evaluations judge the launch-bound forward both ways."""
    seeds = synth.propose(ProposalRequest(spec_source=example_source(name), spec_name=name, count=3))
    assert [s.transformation.params["variant"] for s in seeds[:2]] == ["default", "cuda_graph=on"]
    assert seeds[1].genome == {**seeds[0].genome, "cuda_graph": "on"}


def test_off_is_the_plain_candidate_and_on_wraps_it(synth: OfflineSynthesizer) -> None:
    plain, _, _ = lower_example(synth, WHOLE_MODEL, {})
    off, genome, _ = lower_example(synth, WHOLE_MODEL, {"cuda_graph": "off"})
    on, genome_on, _ = lower_example(synth, WHOLE_MODEL, {"cuda_graph": "on"})
    assert off == plain and genome["cuda_graph"] == "off" and genome_on["cuda_graph"] == "on"
    assert "torch.cuda.CUDAGraph()" not in off and "torch.cuda.CUDAGraph()" in on
    assert on.count("    def forward(") == 1 and "    def _forward_eager(" in on
    eager_body = on[on.index("    def _forward_eager("):].split("\n", 1)[1]
    assert eager_body == off[off.index("    def forward("):].split("\n", 1)[1]  # same generated body


class _EagerGraph:
    """Stand-in for torch.cuda.CUDAGraph off CUDA: replay reruns the captured function
    on the static inputs and writes into the static outputs captured first."""

    captures = 0

    @classmethod
    def runner(cls, fn: Any, static_inputs: list[Any]) -> tuple[Any, Any]:
        cls.captures += 1
        outputs = fn(*static_inputs)

        def replay() -> None:
            fresh = fn(*static_inputs)
            for dst, src in zip(torch.utils._pytree.tree_leaves(outputs), torch.utils._pytree.tree_leaves(fresh),
                                strict=True):
                dst.copy_(src)

        return replay, outputs


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU tensors through Triton's interpreter; with CUDA "
                    "test_capture_and_replay_on_cuda checks the real graph")
def test_replay_logic_with_an_eager_stand_in(synth: OfflineSynthesizer, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    on, _, _ = lower_example(synth, WHOLE_MODEL, {"cuda_graph": "on"})
    cand = import_source(tmp_path, "cand_graph_on", on)
    ref = _reference(WHOLE_MODEL)
    torch.manual_seed(0)
    model = cand.ModelNew(*ref.get_init_inputs())
    torch.manual_seed(0)
    reference = ref.Model(*ref.get_init_inputs())
    with torch.no_grad():
        x = torch.randn(33, ref.WIDTHS[0])
        # off CUDA: the eager path, no capture
        torch.testing.assert_close(model(x), reference(x), rtol=1e-4, atol=1e-4)
        assert getattr(model, "_ke_graph_replay", None) is None
        monkeypatch.setattr(cand, "_graph_ok", lambda args: True)
        monkeypatch.setattr(cand, "_graph_runner", _EagerGraph.runner)
        first_in, second_in = torch.randn(33, ref.WIDTHS[0]), torch.randn(33, ref.WIDTHS[0])
        first = model(first_in)
        second = model(second_in)  # same signature: replayed with the new data
        assert _EagerGraph.captures == 1
        torch.testing.assert_close(first, reference(first_in), rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(second, reference(second_in), rtol=1e-4, atol=1e-4)  # first not overwritten
        assert first.data_ptr() != second.data_ptr()  # clones, not the static outputs
        other = torch.randn(7, ref.WIDTHS[0])
        torch.testing.assert_close(model(other), reference(other), rtol=1e-4, atol=1e-4)
        assert _EagerGraph.captures == 2  # a new signature, a new capture
        torch.testing.assert_close(first_in, first_in.clone())  # inputs are only read


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graph capture needs a CUDA device")
def test_capture_and_replay_on_cuda(synth: OfflineSynthesizer, tmp_path: Path) -> None:
    on, _, _ = lower_example(synth, WHOLE_MODEL, {"cuda_graph": "on"})
    cand = import_source(tmp_path, "cand_graph_cuda", on)
    ref = _reference(WHOLE_MODEL)
    torch.manual_seed(0)
    model = cand.ModelNew(*ref.get_init_inputs()).cuda()
    torch.manual_seed(0)
    reference = ref.Model(*ref.get_init_inputs()).cuda()
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(33, ref.WIDTHS[0], device="cuda")
            torch.testing.assert_close(model(x), reference(x), rtol=1e-3, atol=1e-3)
