"""``layout=channels_last_model``: a chain of Triton conv2d kernels (their fused epilogues,
residual adds included) keeps its activations NHWC between kernels, converted once where
the chain starts and once where it ends. The value is offered only on plans with such a
chain, is off in the seed, writes NHWC only where every reader takes it, and the
candidates are correct in the interpreter on odd shapes, with the reference's output
strides and the expected number of activation conversions (``layout_probe.py`` counts
them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest

from .conftest import example_source, lower_example

STYLES = Path(__file__).resolve().parents[2] / "examples" / "styles"
# batch norm in eval mode folds into the conv epilogues: the blocks are conv chains with
# residual adds (the downsample's output, or the block's input, as an epilogue operand)
RESNET_EVAL = (STYLES / "resnet_make_layer.py").read_text().replace(
    "        self.fc = nn.Linear(16 * block.expansion, num_classes)\n",
    "        self.fc = nn.Linear(16 * block.expansion, num_classes)\n        self.eval()\n")
MODEL = {"impl_conv": "triton", "layout": "channels_last_model"}

# conv -> relu -> conv -> conv + residual (the second conv's output) -> relu, returned:
# odd channel counts and spatial sizes, none a multiple of a block
RESIDUAL_CHAIN = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(5, 6, 3, padding=1)
        self.c2 = nn.Conv2d(6, 7, 3, padding=1, bias=False)
        self.c3 = nn.Conv2d(7, 7, 3, padding=1)

    def forward(self, x):
        h = torch.relu(self.c1(x))
        h = self.c2(h)
        return torch.relu(self.c3(h) + h)


def get_inputs():
    return [torch.randn(2, 5, 7, 9)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 5, 5, 3)]]
'''

# the chain's end is read by a view: written NCHW there (a view of an NHWC tensor fails)
VIEW_HEAD = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 5, 3, padding=1)
        self.c2 = nn.Conv2d(5, 4, 3, stride=2, padding=1)
        self.fc = nn.Linear(4 * 4 * 5, 3)

    def forward(self, x):
        h = torch.relu(self.c2(torch.relu(self.c1(x))))
        return self.fc(h.view(h.size(0), -1))


def get_inputs():
    return [torch.randn(2, 3, 7, 9)]


def get_init_inputs():
    return []
'''

# pools inside the chain: padded ceil-mode max pool with a per-channel scale fused after it
# (a broadcast epilogue operand), and an average pool ending the chain, returned
POOL_CHAIN = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 5, 3, padding=1)
        self.c2 = nn.Conv2d(5, 6, 3, padding=1)
        self.scale = nn.Parameter(torch.rand(5, 1, 1) + 0.5)

    def forward(self, x):
        h = F.max_pool2d(torch.relu(self.c1(x)), 3, stride=2, padding=1, ceil_mode=True) * self.scale
        return F.avg_pool2d(self.c2(h), 2, ceil_mode=True, count_include_pad=False)


def get_inputs():
    return [torch.randn(2, 3, 9, 11)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 7, 5)]]
'''

# outputs whose NHWC and NCHW strides differ though torch calls both contiguous (one
# channel; 1x1 pixels): ``.contiguous()`` would return them as they are
SIZE_ONE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 4, 3, padding=1)
        self.c2 = nn.Conv2d(4, 1, 3, padding=1)
        self.c3 = nn.Conv2d(4, 5, 3, padding=1)

    def forward(self, x):
        h = torch.relu(self.c1(x))
        return self.c2(h), F.adaptive_avg_pool2d(self.c3(h), 1)


def get_inputs():
    return [torch.randn(2, 3, 5, 6)]


def get_init_inputs():
    return []
'''

# a residual operand that is a model input: converted once to NHWC by the launcher
INPUT_RESIDUAL = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(6, 3, 3, 3) * 0.2)
        self.w2 = nn.Parameter(torch.randn(6, 6, 1, 1) * 0.2)

    def forward(self, x, r):
        h = F.gelu(F.conv2d(x, self.w1, padding=1))
        return torch.tanh(F.conv2d(h, self.w2)) + r


def get_inputs():
    return [torch.randn(2, 3, 5, 11), torch.randn(2, 6, 5, 11)]


def get_init_inputs():
    return []
'''


def _layouts(synth: OfflineSynthesizer, name: str, src: str) -> dict[str, list[str]]:
    _, full, _ = synth.lower(synth.captured(src, name), {"impl_conv": "triton"})
    return {k: v for k, v in synth.space(src, name, full) if k.endswith("layout")}


def _probe(jobs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-m", "tests.synthesizer.layout_probe"], input=json.dumps(jobs),
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {r["id"]: r["trials"] for r in json.loads(proc.stdout)}


def test_offered_only_on_conv_chains(synth: OfflineSynthesizer) -> None:
    chain = _layouts(synth, "model_cnn_head", example_source("model_cnn_head"))
    assert _layouts(synth, "resnet_eval", RESNET_EVAL)["layout"][-1] == "channels_last_model"
    assert chain["layout"] == ["mixed", "contiguous", "channels_last", "channels_last_model"]
    assert chain["g0.layout"] == chain["g1.layout"] == ["contiguous", "channels_last", "channels_last_model"]
    # conv -> pool -> conv is a chain
    assert _layouts(synth, "vgg_small", (STYLES / "vgg_small.py").read_text())["layout"][-1] == "channels_last_model"
    # a batch-statistics row kernel (training-mode batch norm) between two convolutions,
    # and a lone convolution: no chain, the value is not offered
    for name in ("resnet_make_layer", "conv2d_bias_relu"):
        src = example_source(name) if name == "conv2d_bias_relu" else (STYLES / f"{name}.py").read_text()
        layouts = _layouts(synth, name, src)
        assert layouts and all("channels_last_model" not in v for v in layouts.values()), (name, layouts)
    # off in the seed, and a genome naming it where it is not offered falls back to the default
    _, full, _ = lower_example(synth, "model_cnn_head", {"impl_conv": "triton"})
    assert full["layout"] == "contiguous"
    _, full, _ = lower_example(synth, "resnet_make_layer", MODEL, (STYLES / "resnet_make_layer.py").read_text())
    assert full["layout"] == "contiguous", full


def test_chain_keeps_nhwc_between_kernels(synth: OfflineSynthesizer) -> None:
    source, full, fallback = lower_example(synth, "residual_chain", MODEL, RESIDUAL_CHAIN)
    assert not fallback and full["layout"] == "channels_last_model"
    # every conv writes NHWC and reads its residual operand NHWC
    assert source.count("out_off = rm[:, None] * COUT + cols") == 3
    assert source.count("memory_format=torch.channels_last)\n") >= 3
    assert "e0 = e0.contiguous(memory_format=torch.channels_last)" in source
    assert "(n_idx[:, None] * COUT + cols) * (OH * OW)" not in source
    # the end of the chain before a view is written NCHW
    head, _, _ = lower_example(synth, "view_head", MODEL, VIEW_HEAD)
    assert head.count("out_off = rm[:, None] * COUT + cols") == 1
    assert head.count("(n_idx[:, None] * COUT + cols) * (OH * OW)") == 1
    # pools inside the chain walk NHWC; a broadcast operand after one is read by (n, c, h, w)
    pools, _, _ = lower_example(synth, "pool_chain", MODEL, POOL_CHAIN)
    assert pools.count("out_off = rm[:, None] * COUT + cols") == 2
    assert pools.count("# layout=channels_last_model: NHWC output and input, C innermost") == 2
    assert "    i0 = nb\n    i1 = ch\n" in pools


def test_correct_with_reference_strides_and_conversions(synth: OfflineSynthesizer) -> None:
    # (name, spec, genome, activation conversions of one forward)
    cases: list[tuple[str, str, dict[str, str], int]] = [
        ("residual_chain", RESIDUAL_CHAIN, MODEL, 2),  # the input, the returned output
        ("residual_chain_per_conv", RESIDUAL_CHAIN, {"impl_conv": "triton", "layout": "channels_last"}, 3),
        ("residual_chain_blocks", RESIDUAL_CHAIN, dict(MODEL, **{"g1.BLOCK_K": "16", "g2.BLOCK_N": "16"}), 2),
        ("view_head", VIEW_HEAD, MODEL, 1),  # the input; the chain's end is written NCHW
        ("input_residual", INPUT_RESIDUAL, MODEL, 3),  # both inputs, the output
        ("model_cnn_head", example_source("model_cnn_head"), MODEL, 1),
        ("pool_chain", POOL_CHAIN, MODEL, 2),  # the input, the returned output
        ("pool_chain_per_conv", POOL_CHAIN, {"impl_conv": "triton", "layout": "channels_last"}, 2),
        # the input; the second pool's output is read by a view (written NCHW, and so is
        # the conv before it)
        ("vgg_small", (STYLES / "vgg_small.py").read_text(), MODEL, 1),
        ("size_one", SIZE_ONE, MODEL, 3),  # the input, both outputs
        # the input; the last block's output is read by the global pool (written NCHW)
        ("resnet_eval", RESNET_EVAL, MODEL, 1),
        ("resnet_eval_per_conv", RESNET_EVAL, {"impl_conv": "triton", "layout": "channels_last"}, 6),  # one per conv
    ]
    jobs = []
    for name, src, genome, _ in cases:
        source, full, fallback = lower_example(synth, name.split("_per_")[0], genome, src)
        assert not fallback and all(full[k] == v for k, v in genome.items()), (name, full)
        jobs.append({"id": name, "spec_source": src, "candidate_source": source, "atol": 1e-4, "rtol": 1e-4})
    results = _probe(jobs)
    for name, _, _, conversions in cases:
        trials = results[name]
        assert trials, name
        for t in trials:
            assert t["close"], (name, t)
            assert t["strides"][0] == t["strides"][1], (name, t)
            assert t["conversions"] == conversions, (name, t)


@pytest.mark.parametrize("name,src", [("residual_chain", RESIDUAL_CHAIN), ("pool_chain", POOL_CHAIN),
                                      ("size_one", SIZE_ONE)])
def test_judged_by_the_evaluator(name: str, src: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    """The evaluator's protocol: output strides as the reference's (one channel and 1x1
    pixels included), and the NaN probe and arithmetic audit over NHWC intermediates."""
    source, full, _ = lower_example(synth, name, MODEL, src)
    assert full["layout"] == "channels_last_model"
    verdict = judge.evaluate(src, source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"


def test_search_reaches_it_in_one_edge(synth: OfflineSynthesizer) -> None:
    """Once the convolutions are Triton, one edge of the family-wide move sets every conv
    group to channels_last_model."""
    src = example_source("model_cnn_head")
    source, full, _ = lower_example(synth, "model_cnn_head", {"impl_conv": "triton"})
    parent = ParentInfo("triton", source, None, full)
    children = synth.propose(ProposalRequest(spec_source=src, spec_name="model_cnn_head", count=200, parent=parent))
    moved = [c for c in children if c.transformation.name == "layout" and "group" not in c.transformation.params
             and c.transformation.params["value"] == "channels_last_model"]
    assert len(moved) == 1
    assert moved[0].genome["g0.layout"] == moved[0].genome["g1.layout"] == "channels_last_model"
    assert "out_off = rm[:, None] * COUT + cols" in moved[0].source
