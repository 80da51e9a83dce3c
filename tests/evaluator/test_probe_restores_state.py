"""The kernel-dependency probe leaves the candidate as it found it (worker/launch_counter.py,
``LaunchRecorder.restore``): its NaN-fills reach what a suppressed launch only reads, and a
candidate that keeps such a tensor across calls (the synthesizer's convolutions pack their
weight once per weight version) must not compute NaN for the rest of its evaluation. On an
H100 the arithmetic audit, which runs next, rejected honest convolution seeds as moves."""

from __future__ import annotations

import gc
import types
from pathlib import Path

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_evaluator.worker import launch_counter
from tests.kernel_files import import_source

SPEC = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d({cin}, {cout}, {k}, padding={pad})

    def forward(self, x):
        return self.conv(x)


def get_inputs():
    return [torch.randn({n}, {cin}, {length})]


def get_init_inputs():
    return []
'''

# A direct 1-D convolution whose weight is packed [tap, cin, cout] once per weight tensor and
# version, as the synthesizer's seeds do; no comparison in the kernel (relu's tl.maximum
# or a tl.where would count as selection, and NaN selected among NaN computes)
CANDIDATE = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _conv1d(x_ptr, w_ptr, b_ptr, y_ptr, CIN, COUT, L, OL, K, PAD,
            BLOCK_L: tl.constexpr, BLOCK_C: tl.constexpr):
    n = tl.program_id(0)
    ol = tl.program_id(1) * BLOCK_L + tl.arange(0, BLOCK_L)
    co = tl.arange(0, BLOCK_C)
    acc = tl.zeros([BLOCK_L, BLOCK_C], dtype=tl.float32)
    for tap in range(0, K):
        il = ol - PAD + tap
        ok = (ol < OL) & (il >= 0) & (il < L)
        for ci in range(0, CIN):
            xv = tl.load(x_ptr + (n * CIN + ci) * L + il, mask=ok, other=0.0)
            wv = tl.load(w_ptr + (tap * CIN + ci) * COUT + co, mask=co < COUT, other=0.0)
            acc += xv[:, None] * wv[None, :]
    acc += tl.load(b_ptr + co, mask=co < COUT, other=0.0)[None, :]
    tl.store(y_ptr + (n * COUT + co[None, :]) * OL + ol[:, None], acc, mask=(ol[:, None] < OL) & (co[None, :] < COUT))


_packed = [None, -1, -1, None]  # weight, its version and storage -> packed weight


def _pack(w):
    pk = _packed
    if pk[0] is not w or pk[1] != w._version or pk[2] != w.data_ptr():
        pk[:] = [w, w._version, w.data_ptr(), w.permute(2, 1, 0).contiguous()]
    return pk[3]


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d({cin}, {cout}, {k}, padding={pad})

    def forward(self, x):
        x = x.contiguous()
        w = self.conv.weight
        nb, cin, length = x.shape
        cout, k = w.shape[0], w.shape[2]
        out_len = length + 2 * {pad} - k + 1
        y = torch.empty(nb, cout, out_len, device=x.device, dtype=torch.float32)
        grid = (nb, triton.cdiv(out_len, 32))
        _conv1d[grid](x, _pack(w), self.conv.bias, y, cin, cout, length, out_len, k, {pad},
                      BLOCK_L=32, BLOCK_C=triton.next_power_of_2(cout))
        return y
'''

SHAPES = [dict(n=2, cin=3, cout=5, k=3, pad=1, length=37), dict(n=1, cin=7, cout=1, k=4, pad=0, length=13)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(str(v) for v in s.values()))
def test_a_weight_packed_once_survives_the_dependency_probe(judge: Judge, shape: dict[str, int]) -> None:
    v = judge.evaluate(SPEC.format(**shape), CANDIDATE.format(**shape), candidate_id="packed_once")
    assert v.status == "correct", v.reason
    assert v.evidence["kernel_dependency"] == "output changes when the kernels are suppressed"
    assert v.evidence["kernel_arithmetic"]["computing"] == 1, v.evidence["kernel_arithmetic"]


KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def scale_by(x_ptr, t_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * tl.load(t_ptr + offs, mask=mask), mask=mask)
'''


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> types.ModuleType:
    module = import_source(Path(tmp_path_factory.mktemp("probe")), "probe_kernels", KERNELS)
    launch_counter.install()
    return module


@pytest.mark.parametrize("n", [1, 29, 64])
@pytest.mark.parametrize("cached", ["whole", "view"])
def test_suppression_fills_then_puts_back_what_outlives_the_call(kernels: types.ModuleType, n: int,
                                                                 cached: str) -> None:
    x = torch.randn(n)
    base = torch.randn(3, n)  # kept across calls; the kernel may read a view of it
    table = base if cached == "whole" else base[1]
    before = base.clone()
    rec = launch_counter.LaunchRecorder(module_name=kernels.__name__, suppress=True,
                                        protected=[launch_counter._storage_span(x)])

    def forward() -> torch.Tensor:
        scratch = torch.randn(n)  # freed before the call returns: its copy goes with it
        kernels.scale_by[(1,)](x, table, scratch, n, BLOCK=64)
        y = torch.full((n,), float("nan"))  # what the NaN-poisoned allocator hands out: nothing to keep
        kernels.scale_by[(1,)](scratch, table, y, n, BLOCK=64)  # filled twice: the first copy counts
        return y

    with launch_counter.recording(rec):
        y = forward()
    gc.collect()
    assert torch.isnan(y).all() and torch.isnan(table).all()  # what the probe's check sees
    # only the table's copy is held: the freed scratch took its own along, and y held NaN already
    roots = [ow.root() for ow in rec.overwritten.values()]
    assert len(roots) == 1 and roots[0] is base  # a view's copy is held through its base
    rec.restore()
    assert torch.equal(base, before) and not rec.overwritten
