"""Pooling lowering: max / avg pool 1d, 2d and 3d become pool kernels (window, stride,
padding, count_include_pad, pointwise epilogue); max pools with return_indices (plain and
adaptive) compute values and int64 indices in one kernel, torch's index convention
(flat within the input plane, first maximum on ties, NaN wins) included (ceil_mode,
dilation, divisor_override and adaptive pools: test_pool_variants.py)."""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge
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

# max pools with indices: module and functional, padded, ceil_mode, dilated, adaptive, 1-D
# to 3-D; integer-valued inputs make ties (the first maximum's index wins) and -inf / NaN
# entries the edge rules (an all -inf window keeps its first in-bounds tap, NaN wins)
INDICES = '''"""Max pools that return indices."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.idx = nn.MaxPool3d(2, return_indices=True)
        self.ada = nn.AdaptiveMaxPool2d((3, None), return_indices=True)

    def forward(self, x):
        v, i = self.idx(x)
        w, j = F.max_pool3d(x, 3, 2, 1, return_indices=True, ceil_mode=True)
        flat = x.flatten(3)
        a, k = F.max_pool1d(flat[0], 3, 2, 1, dilation=2, return_indices=True)
        b, m = self.ada(x[0])
        c, n = F.adaptive_max_pool1d(flat[:, 0], 5, return_indices=True)
        return v + 1.0, i, torch.relu(w), j, a, k, b, m, c, n


def _ties(*shape):
    x = torch.randint(-3, 4, shape).float()
    x.view(-1)[::11] = float("-inf")
    x.view(-1)[5::97] = float("nan")
    return x


def get_inputs():
    return [_ties(2, 3, 5, 6, 7)]


def get_extra_inputs():
    return [[_ties(1, 2, 3, 7, 4)]]


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


def test_pools_with_indices_are_lowered_and_correct(synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, INDICES, "pool_indices")
    assert prop.fallback_nodes == ()
    assert prop.source.count("def launch_pool_") == 5
    assert prop.source.count("tl.store(idx_ptr + offs, best, mask=mask)") == 5  # values and indices in one pass
    (result,) = run_in_subprocess([{"id": "indices", "spec_source": INDICES, "candidate_source": prop.source,
                                    "seeds": [1, 2]}])
    assert result["ok"], (result["error"][-500:], result["trials"])
    assert [t["kind"] for t in result["trials"]].count("extra") == 1


def test_pools_with_indices_are_judged_correct(synth: OfflineSynthesizer, judge: Judge) -> None:
    verdict = judge.evaluate(INDICES, _propose(synth, INDICES, "pool_indices").source, "pool_indices")
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"


# max unpooling after a pool with indices (the values scaled in between), module and
# functional, with and without output_size, 1-D to 3-D, odd sizes
UNPOOL = '''"""Max unpooling."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(2, return_indices=True)
        self.unpool = nn.MaxUnpool2d(2)

    def forward(self, x):
        v, i = self.pool(x)
        a = self.unpool(v * 2.0, i, output_size=[7, 9])
        w, j = F.max_pool3d(x.unsqueeze(1), 3, 2, 1, return_indices=True)
        b = F.max_unpool3d(torch.relu(w), j, 3, 2, 1, output_size=(3, 7, 9))
        flat = x.flatten(2)
        u, k = F.max_pool1d(flat, 3, 3, return_indices=True)
        c = F.max_unpool1d(u, k, 3, 3, output_size=[63])
        return a, b, c


def get_inputs():
    return [torch.randn(2, 3, 7, 9)]


def get_init_inputs():
    return []
'''


def test_max_unpool_is_lowered_and_correct(synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, UNPOOL, "unpool")
    assert prop.fallback_nodes == ()
    assert prop.source.count("def launch_unpool_") == 3 and prop.source.count("def launch_pool_") == 3
    (result,) = run_in_subprocess([{"id": "unpool", "spec_source": UNPOOL, "candidate_source": prop.source,
                                    "seeds": [1, 2]}])
    assert result["ok"], (result["error"][-500:], result["trials"])
