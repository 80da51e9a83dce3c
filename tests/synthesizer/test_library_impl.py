"""The ``impl.<node>`` knob: a conv / matmul node as a library call whose pointwise
neighbours still fuse into one Triton kernel, judged correct by the evaluator's full
protocol (interpreter on CPU); a bare conv never gets the knob."""

from __future__ import annotations

import re

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.families.library_impl import LIBRARY_COMMENT
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest

from .conftest import example_source

# spec -> (library node, its library call in the forward, Triton kernels with impl=library)
CASES = {
    "conv2d_bias_relu": ("conv", "self._modules['conv'](x)", 1),
    "conv1d_dilated_gelu": ("conv", "self._modules['conv'](x)", 1),
    "linear_bias_relu": ("linear", "self._modules['linear'](x)", 1),
}

BARE_CONV = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn(2, 3, 8, 8)]


def get_init_inputs():
    return []
'''



def _library_child(synth: OfflineSynthesizer, name: str, node: str):
    """The child of the default seed along the edge impl.<node> = library."""
    src = example_source(name)
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    assert seed.genome[f"impl.{node}"] == "triton" and node not in seed.fallback_nodes
    parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
    children = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=100, parent=parent))
    (child,) = [c for c in children if c.transformation.name == "impl"
                and c.transformation.params == {"group": node, "value": "library"}]
    return src, child


@pytest.mark.parametrize("name", sorted(CASES))
def test_library_call_with_fused_triton_epilogue(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    node, call, kernels = CASES[name]
    src, child = _library_child(synth, name, node)
    assert child.genome[f"impl.{node}"] == "library"
    assert child.fallback_nodes == (node,)
    assert f"t_{node} = {call}{LIBRARY_COMMENT}" in child.source
    assert child.source.count("@triton.jit") == kernels
    assert f"# reads the library output t_{node}" in child.source
    assert f"epilogue.{node}" not in child.genome  # no epilogue boundary without the Triton conv / matmul
    verdict = judge.evaluate(src, child.source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert len(verdict.evidence["kernel_launches"]) == kernels


def test_whole_model_with_every_conv_and_linear_in_the_library(synth: OfflineSynthesizer, judge: Judge) -> None:
    name = "model_cnn_head"
    src = example_source(name)
    space = dict(synth.space(src, name))
    anchors = ("c1", "c2", "fc")
    # the seed policy starts a model's convolutions in the library (impl_policy.py), its lone matmul in Triton
    assert space["impl.c1"] == space["impl.c2"] == ["library", "triton"] and space["impl.fc"] == ["triton", "library"]
    source, full, fallback = synth.lower(synth._capture(src, name), {f"impl.{a}": "library" for a in anchors})
    assert all(full[f"impl.{a}"] == "library" for a in anchors)
    assert fallback == anchors
    # relu after c1: a pointwise kernel; relu after c2 and the global average pool: one row
    # kernel (its launcher holds one Triton kernel per row strategy)
    forward = source[source.index("    def forward"):]
    assert re.findall(r"= (launch_\w+)\(", forward) == ["launch_pointwise_relu_0", "launch_row_relu_mean_1"]
    verdict = judge.evaluate(src, source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert len(verdict.evidence["kernel_launches"]) == 2


def test_bare_conv_keeps_its_triton_kernel(synth: OfflineSynthesizer) -> None:
    assert not [k for k, _ in synth.space(BARE_CONV, "bare_conv") if k.startswith("impl.")]
    # asking for it anyway is ignored: a candidate must launch one of its own kernels
    source, full, fallback = synth.lower(synth._capture(BARE_CONV, "bare_conv"), {"impl.conv": "library"})
    assert fallback == () and "impl.conv" not in full
    assert source.count("@triton.jit") == 1
    assert not [k for k, _ in synth.space(example_source("mm_plain"), "mm_plain") if k.startswith("impl.")]
