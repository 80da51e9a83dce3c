"""Family-wide moves (``impl_conv``, ``impl_matmul``, ``layout``: every node of a family
in one edge), the seed's impl policy (library for the convolutions of a whole model,
Triton for a lone conv, a measured cache overriding both) and batch norm in eval mode
folded into the convolution's epilogue; the all-library candidate of a small CNN judged
by the evaluator's full protocol (interpreter, arithmetic audit included)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ke_evaluator.judge import EvalOptions, Judge, TimingOptions
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.families.impl_policy import ImplCache, ImplPolicy, signature
from ke_synthesizer.offline.families.library_impl import heavy_nodes
from ke_synthesizer.offline.graph import _param_shape_fn
from ke_synthesizer.offline.space import MIXED
from ke_synthesizer.registry import _offline
from kernelevolve.config import load_settings
from kernelevolve.errors import ConfigError
from kernelevolve.ports.knowledge import NoKnowledge
from kernelevolve.ports.synthesis import ParentInfo, Proposal, ProposalRequest

from .conftest import example_source

# A small CNN on odd sizes: three convolutions (one strided, one depthwise), batch norm,
# a residual add, a max pool and a linear head. Every convolution has a Triton neighbour.
CNN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 5, 3, padding=1)
        self.b1 = nn.BatchNorm2d(5)
        self.c2 = nn.Conv2d(5, 5, 3, padding=1, groups=5)
        self.c3 = nn.Conv2d(5, 6, 3, stride=2, padding=1, bias=False)
        self.fc = nn.Linear(6, 3)
        {mode}

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = F.relu(self.c2(h) + h)
        h = F.max_pool2d(self.c3(h), 2)
        return self.fc(h.mean((2, 3)))


def get_inputs():
    return [torch.randn(2, 3, 13, 11)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 9, 7)]]
'''
TRAIN = CNN.replace("{mode}", "")
EVAL = CNN.replace("{mode}", "self.eval()")
CONVS = ("c1", "c2", "c3")


def _seed(synth: OfflineSynthesizer, src: str, name: str, hardware: str = "cpu") -> Proposal:
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1, hardware_kind=hardware))
    return seed


def _children(synth: OfflineSynthesizer, src: str, name: str, parent: Proposal) -> list[Proposal]:
    info = ParentInfo("p", parent.source, parent.transformation, dict(parent.genome))
    return list(synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=500, parent=info)))


def _keys(space: list[tuple[str, list[str]]]) -> set[str]:
    return {k for k, _ in space}


def test_moves_appear_for_several_convs_or_matmuls_only(synth: OfflineSynthesizer) -> None:
    moves = {"impl_conv", "impl_matmul"}
    assert _keys(synth.space(example_source("model_cnn_head"), "model_cnn_head")) & moves == {"impl_conv"}
    assert _keys(synth.space(example_source("model_mlp"), "model_mlp")) & moves == {"impl_matmul"}
    lone = _keys(synth.space(example_source("conv2d_bias_relu"), "conv2d_bias_relu"))
    assert "impl.conv" in lone and not lone & (moves | {"layout"})
    assert not _keys(synth.space(example_source("linear_bias_relu"), "linear_bias_relu")) & moves
    space = dict(synth.space(TRAIN, "cnn"))
    assert space["impl_conv"] == [MIXED, "triton", "library"]
    # the layout move needs Triton convolutions (two conv2d groups with a layout knob)
    assert "layout" not in space
    all_triton = dict(synth.space(TRAIN, "cnn", {f"impl.{c}": "triton" for c in CONVS}))
    assert all_triton["layout"] == [MIXED, "contiguous", "channels_last"]


def test_a_move_sets_every_node_of_its_family_in_one_edge(synth: OfflineSynthesizer) -> None:
    seed = _seed(synth, TRAIN, "cnn")
    assert seed.genome["impl_conv"] == "library" and seed.genome["impl.fc"] == "triton"
    (to_triton,) = [c for c in _children(synth, TRAIN, "cnn", seed) if c.transformation.name == "impl_conv"]
    assert to_triton.transformation.params == {"value": "triton"}
    assert all(to_triton.genome[f"impl.{c}"] == "triton" for c in CONVS)
    assert to_triton.genome["impl_conv"] == "triton" and to_triton.fallback_nodes == ()
    assert to_triton.genome["impl.fc"] == "triton"  # another family is left alone
    # one more edge moves all of them back; a single-node edge makes the family mixed
    children = _children(synth, TRAIN, "cnn", to_triton)
    (back,) = [c for c in children if c.transformation.name == "impl_conv"]
    assert back.fallback_nodes == CONVS and back.genome["impl_conv"] == "library"
    one = next(c for c in children if c.transformation.name == "impl"
               and c.transformation.params == {"group": "c2", "value": "library"})
    assert one.fallback_nodes == ("c2",) and one.genome["impl_conv"] == MIXED
    # the layout move turns every Triton conv2d to channels-last at once
    (layout,) = [c for c in children if c.transformation.name == "layout" and "group" not in c.transformation.params]
    keys = [k for k in to_triton.genome if k.endswith(".layout")]
    assert len(keys) >= 2 and all(layout.genome[k] == "channels_last" for k in keys)
    assert layout.genome["layout"] == "channels_last" and to_triton.genome["layout"] == "contiguous"


def test_a_hand_written_move_is_expanded(synth: OfflineSynthesizer) -> None:
    _, full, fallback = synth.lower(synth._capture(TRAIN, "cnn"), {"impl_conv": "triton"})
    assert fallback == () and full["impl_conv"] == "triton"
    _, full, fallback = synth.lower(synth._capture(TRAIN, "cnn"), {"impl_conv": "triton", "impl_matmul": "library"})
    assert fallback == () and "impl_matmul" not in full  # one matmul: no such move, the key is ignored
    # a completed genome edited per node is read by its members (its move value is derived, stale here)
    _, seed, _ = synth.lower(synth._capture(TRAIN, "cnn"), {})
    _, full, fallback = synth.lower(synth._capture(TRAIN, "cnn"), {**seed, "impl.c2": "triton"})
    assert seed["impl_conv"] == "library" and fallback == ("c1", "c3") and full["impl_conv"] == MIXED


@pytest.mark.parametrize("name,src", [("cnn_train", TRAIN), ("cnn_eval", EVAL)])
def test_all_library_cnn_is_correct_and_passes_the_arithmetic_audit(name: str, src: str,
                                                                    synth: OfflineSynthesizer, judge: Judge) -> None:
    seed = _seed(synth, src, name)  # several convolutions: the seed has them all in the library
    assert seed.fallback_nodes == CONVS
    assert seed.source.count("# library call (impl=library") == 3
    verdict = judge.evaluate(src, seed.source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    audit = verdict.evidence["kernel_arithmetic"]
    assert audit["computing"] >= 1, audit


def test_eval_batch_norm_folds_into_the_conv_epilogue(synth: OfflineSynthesizer) -> None:
    """Running statistics are a per-channel scale and shift: in the Triton conv's epilogue
    (c1 + batch norm + relu one kernel), or in the Triton kernel after the library conv."""
    launches = {}
    for impl in ("triton", "library"):
        source, _, fallback = synth.lower(synth._capture(EVAL, "cnn_eval"), {f"impl.{c}": impl for c in CONVS})
        assert "b1" not in fallback and "_buffers['running_var']" in source
        forward = source[source.index("    def forward"):]
        launches[impl] = re.findall(r"= (launch_\w+)\(", forward)
    assert launches["triton"][0].startswith("launch_conv_conv_add_rsqrt") and len(launches["triton"]) == 6
    assert launches["library"][0].startswith("launch_pointwise_add_rsqrt") and len(launches["library"]) == 5


def test_seed_policy_library_for_a_model_triton_for_a_lone_conv(synth: OfflineSynthesizer) -> None:
    assert _seed(synth, example_source("conv2d_bias_relu"), "conv2d_bias_relu").genome["impl.conv"] == "triton"
    head = _seed(synth, example_source("model_cnn_head"), "model_cnn_head")
    assert head.fallback_nodes == ("c1", "c2") and head.genome["impl.fc"] == "triton"
    assert _seed(synth, example_source("model_mlp"), "model_mlp").fallback_nodes == ()  # matmuls: Triton


def _signature_of(src: str, name: str, node: str, synth: OfflineSynthesizer):  # noqa: ANN202
    spec = synth._capture(src, name)
    family, n = heavy_nodes(spec.gm, _param_shape_fn(spec))[f"impl.{node}"]
    return signature(n, family, spec.gm)


def test_the_measured_cache_overrides_the_heuristic(tmp_path: Path, synth: OfflineSynthesizer) -> None:
    lone_src = example_source("conv2d_bias_relu")
    cache = ImplCache()
    assert cache.record(_signature_of(lone_src, "lone", "conv", synth), "nvidia-h100", 0.30, 0.10) == "library"
    assert cache.record(_signature_of(TRAIN, "cnn", "c2", synth), "NVIDIA-H100", 0.05, 0.09) == "triton"
    path = tmp_path / "impl_cache.json"
    cache.save(path)
    doc = json.loads(path.read_text())
    assert doc["version"] == 1 and {e["choice"] for e in doc["entries"]} == {"library", "triton"}
    measured = OfflineSynthesizer(policy=ImplPolicy(ImplCache.load(path)))
    # the lone conv measured faster in the library: its seed calls it, on that device only
    assert _seed(measured, lone_src, "lone", "nvidia-h100").fallback_nodes == ("conv",)
    assert _seed(measured, lone_src, "lone", "cpu").fallback_nodes == ()
    # the depthwise conv of the CNN measured faster in Triton: the others keep the heuristic
    cnn = _seed(measured, TRAIN, "cnn", "nvidia-h100")
    assert cnn.fallback_nodes == ("c1", "c3") and cnn.genome["impl_conv"] == MIXED
    assert ImplCache.load(tmp_path / "absent.json").lookup(_signature_of(TRAIN, "cnn", "c1", synth), "x") is None
    (tmp_path / "bad.json").write_text(json.dumps({"version": 1, "entries": [{"op": "x"}]}))
    with pytest.raises(ConfigError):
        ImplCache.load(tmp_path / "bad.json")


def test_moved_candidates_are_correct_on_odd_shapes(synth: OfflineSynthesizer) -> None:
    """Every convolution in Triton (eval batch norm in its epilogue), channels-last
    throughout, and mixed: correct in the interpreter on the example and the extra shapes."""
    triton = {f"impl.{c}": "triton" for c in CONVS}
    genomes = {"eval_triton": (EVAL, triton), "eval_channels_last": (EVAL, {**triton, "layout": "channels_last"}),
               "train_mixed": (TRAIN, {"impl.c2": "triton"})}
    jobs = []
    for job, (src, genome) in genomes.items():
        source, full, _ = synth.lower(synth._capture(src, job), genome)
        if job == "eval_channels_last":
            assert full["layout"] == "channels_last"
        jobs.append({"id": job, "spec_source": src, "candidate_source": source, "seeds": [1, 2]})
    for result in run_in_subprocess(jobs):
        assert result["ok"], result


def test_the_configured_cache_reaches_the_offline_synthesizer(tmp_path: Path, synth: OfflineSynthesizer) -> None:
    lone_src = example_source("conv2d_bias_relu")
    cache = ImplCache()
    cache.record(_signature_of(lone_src, "lone", "conv", synth), "cpu", 0.30, 0.10)
    cache.save(tmp_path / "impl.json")
    settings = load_settings(env={"KE_SYNTHESIZER_IMPL_CACHE": str(tmp_path / "impl.json")})
    configured = _offline(settings, NoKnowledge())
    assert isinstance(configured, OfflineSynthesizer)
    assert _seed(configured, lone_src, "lone").fallback_nodes == ("conv",)


def test_the_library_share_is_in_the_evaluators_evidence(synth: OfflineSynthesizer) -> None:
    """The all-library CNN leaves its 3 convolutions of the reference's 4 heavy ops (3 convs
    and the linear) to the library; the profiler's op counts and the reference's agree."""
    seed = _seed(synth, TRAIN, "cnn")
    opts = EvalOptions(device="cpu", correctness_trials=1, timing=TimingOptions(max_trials=2, input_sets=1))
    with Judge(opts) as judge:
        verdict = judge.evaluate(TRAIN, seed.source, "cnn")
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert verdict.evidence["library_share"] == {"library_calls": 3, "heavy_ops": 4}
