"""Pooling lowering: max / avg pool 1d, 2d and 3d become pool kernels (window, stride,
padding, count_include_pad, pointwise epilogue); return_indices stays a library call and
the candidate stays correct (ceil_mode, dilation, divisor_override and adaptive pools:
test_pool_variants.py)."""

from __future__ import annotations

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import example_source

# 3-D pools in every spelling the lowering accepts: functional and module, batched
# [N, C, D, H, W] and unbatched [C, D, H, W], cubic and non-cubic windows, and the
# global adaptive average pool (rewritten to a mean)
LOWERED_3D = '''"""3-D pools that are lowered."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.avg = nn.AvgPool3d(3, stride=(1, 2, 2), padding=1)
        self.head = nn.AdaptiveAvgPool3d(1)

    def forward(self, x, y):
        a = F.max_pool3d(x, kernel_size=(1, 2, 2))
        b = torch.relu(self.avg(x)) - 0.5
        c = F.avg_pool3d(y, 2, stride=1, padding=1, count_include_pad=False)
        return a, b, c, self.head(a)  # global average pool: a mean over (D, H, W)


def get_inputs():
    return [torch.randn(2, 3, 4, 6, 7), torch.randn(3, 3, 5, 4)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 3, 5, 9), torch.randn(2, 2, 3, 3)]]
'''

# pools the kernel does not cover (indices): each stays a library call, its epilogue still Triton
UNSUPPORTED = '''"""3-D pools that stay library calls."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.idx = nn.MaxPool3d(2, return_indices=True)

    def forward(self, x):
        v, i = self.idx(x)
        w, j = F.max_pool3d(x, 3, 2, 1, return_indices=True)
        return v + 1.0, i, torch.relu(w), j


def get_inputs():
    return [torch.randn(2, 3, 5, 6, 7)]


def get_init_inputs():
    return []
'''


def _propose(synth: OfflineSynthesizer, src: str, name: str):
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    return prop


@pytest.mark.parametrize("name", ["maxpool3d_gelu", "avgpool3d_padded"])
def test_3d_pool_examples_are_lowered(name: str, synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, example_source(name), name)
    assert prop.fallback_nodes == ()
    assert "library call" not in prop.source
    assert prop.source.count("def launch_pool_") == 1  # pool and epilogue in one kernel
    assert "_pool3d" in prop.source and "for kd in tl.static_range(" in prop.source


def test_3d_pool_spellings_are_lowered_and_correct(synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, LOWERED_3D, "pool3d_spellings")
    assert prop.fallback_nodes == ()
    assert prop.source.count("def launch_pool_") == 3
    (result,) = run_in_subprocess([{"id": "lowered", "spec_source": LOWERED_3D, "candidate_source": prop.source,
                                    "seeds": [1, 2]}])
    assert result["ok"], (result["error"][-500:], result["trials"])
    assert [t["kind"] for t in result["trials"]].count("extra") == 1  # odd sizes, another batch


def test_unsupported_pool_variants_fall_back_and_stay_correct(synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, UNSUPPORTED, "pool3d_unsupported")
    assert set(prop.fallback_nodes) == {"max_pool3d_with_indices", "idx"}
    assert "def launch_pool_" not in prop.source
    assert "@triton.jit" in prop.source  # the epilogues (shift, relu) are still Triton
    (result,) = run_in_subprocess([{"id": "fallback", "spec_source": UNSUPPORTED, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-500:], result["trials"])
