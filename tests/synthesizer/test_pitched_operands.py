"""Row-pitched operands of flat pointwise kernels: an operand of the output's shape whose
last dim has stride 1 and whose leading dims collapse into one (a chunk of the last dim,
``x[:, 1:]``) is a 2-D [R, C] array with row pitch P, read in place as
``offs // C * P + offs % C`` (``PITCHED<i>`` constexprs) instead of from a
``.contiguous()`` copy. Only operands the example run saw as such views get the flag;
the launcher decides per input signature (cached plan) and copies anything else
(transposed, chunked on a middle dim, broadcast at run time). VEC = 4 is only launched
when no operand is pitched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.emit.launch_helpers import LAUNCH_HELPERS
from kernelevolve.ports.synthesis import ProposalRequest
from tests.kernel_files import import_source

from .conftest import example_source

# a 3-D chunk on the last dim: leading dims (B, S) collapse into rows 2H apart; the second
# extra input has a size-1 batch dim
GLU_3D = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return torch.tanh(a) * torch.sigmoid(b)


def get_inputs():
    return [torch.randn(3, 5, 2 * 24)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 3, 2 * 7)], [torch.randn(1, 4, 2 * 5)]]
'''

# pitched chunk halves mixed with a contiguous operand; extra inputs: x transposed (its
# halves have stride 6 on the last dim: copied), y transposed (no flag: copied), y
# broadcasting at run time (everything materialised)
MIXED = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a, b = x.chunk(2, dim=-1)
        return a * torch.sigmoid(b) + y


def get_inputs():
    return [torch.randn(16, 2 * 40), torch.randn(16, 40)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2 * 40, 6).t(), torch.randn(6, 40)],
            [torch.randn(5, 2 * 9), torch.randn(9, 5).t()],
            [torch.randn(3, 2 * 40), torch.randn(1, 40)]]
'''

# a chunk on a middle dim ([B, M, N] halves with strides (2MN, N, 1): not row-pitched, copied)
# next to one on the last dim (pitched)
MIDDLE_CHUNK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        a, b = x.chunk(2, dim=1)
        c, d = y.chunk(2, dim=-1)
        return a * torch.sigmoid(b) - c * d


def get_inputs():
    return [torch.randn(3, 2 * 6, 10), torch.randn(3, 6, 2 * 10)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 2 * 3, 7), torch.randn(2, 3, 2 * 7)]]
'''

# slices with a row offset: x[:, 1:] starts one element in (the data pointer carries the
# offset), rows C + 1 apart; a one-row extra input makes the slices contiguous
ROW_OFFSET = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        return torch.sigmoid(x[:, 1:]) * y[:, :-1] + x[:, :-1]


def get_inputs():
    return [torch.randn(12, 33), torch.randn(12, 33)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 4), torch.randn(5, 4)], [torch.randn(1, 9), torch.randn(1, 9)]]
'''

# a broadcast bias next to pitched halves: the unravelling kernel, rows of d1 elements
BIAS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(24))

    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return a * torch.sigmoid(b) + self.bias


def get_inputs():
    return [torch.randn(10, 48)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 48)], [torch.randn(48, 7).t()]]
'''

SPECS = {"glu_3d": GLU_3D, "mixed": MIXED, "middle_chunk": MIDDLE_CHUNK, "row_offset": ROW_OFFSET, "bias": BIAS}


def _source(synth: OfflineSynthesizer, name: str, genome: dict[str, str] | None = None) -> str:
    src = SPECS.get(name) or example_source(name)
    if genome is None:
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        assert not prop.fallback_nodes, (name, prop.fallback_nodes)
        return prop.source
    source, full, fallback = synth.lower(synth._capture(src, name), genome)
    assert not fallback and all(full[k] == v for k, v in genome.items()), (name, full)
    return source


class _Recorder:
    """Stands in for a kernel: records the arguments of each ``kernel[grid](...)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __getitem__(self, grid: Any):
        return lambda *args, **kwargs: self.calls.append((args, kwargs))


def _load_recorded(source: str, tmp_path: Path, name: str) -> tuple[Any, _Recorder]:
    """The candidate module with its (only) pointwise kernel replaced by a recorder."""
    mod = import_source(tmp_path, name, source)
    (kernel,) = [k for k in vars(mod) if k.startswith("pointwise_")]
    rec = _Recorder()
    setattr(mod, kernel, rec)
    return mod, rec


def _flags(kwargs: dict[str, Any]) -> dict[str, bool]:
    return {k: v for k, v in kwargs.items() if k.startswith("PITCHED")}


def test_flat_read_rule() -> None:
    namespace: dict[str, Any] = {}
    exec(LAUNCH_HELPERS["_flat_read"], namespace)  # noqa: S102 - the helper the launchers carry
    flat_read = namespace["_flat_read"]
    x = torch.randn(6, 20)
    a, b = x.chunk(2, dim=-1)
    assert flat_read(x, 20) == (False, 20, False)
    assert flat_read(a, 10) == (False, 20, True) and flat_read(b, 10) == (False, 20, True)
    assert flat_read(torch.randn(4, 5, 16).chunk(2, dim=-1)[1], 8) == (False, 16, True)  # (B, S) collapse
    assert flat_read(torch.randn(1, 5, 16)[:, :, 1:9], 8) == (False, 16, True)  # size-1 dims skipped
    assert flat_read(x[:, 1:], 19) == (False, 20, True)
    assert flat_read(torch.randn(1, 20).expand(6, 20), 20) == (False, 0, True)  # rows 0 apart
    assert flat_read(x.t(), 6) == (True, 6, False)  # last-dim stride 20
    assert flat_read(torch.randn(3, 8, 5).chunk(2, dim=1)[0], 5) == (True, 5, False)  # middle dim
    assert flat_read(torch.randn(20)[::2], 10) == (True, 10, False)  # 1-D strided
    # the last address must fit the kernels' int32 offsets
    big = torch.empty_strided((2**16, 2**15), (2**15 + 1, 1), device="meta")
    assert flat_read(big, 2**15) == (True, 2**15, False)
    assert flat_read(big[: 2**15], 2**15) == (False, 2**15 + 1, True)


def test_glu_reads_the_chunk_halves_in_place(synth: OfflineSynthesizer, tmp_path: Path) -> None:
    source = _source(synth, "glu_sigmoid")
    assert "PITCHED0: tl.constexpr, PITCHED1: tl.constexpr," in source
    assert "o0 = offs // row_len * in0_pitch + offs % row_len if PITCHED0 else offs" in source
    launcher = source.split("def launch_pointwise_sigmoid_mul_0", 1)[1].split("\n\n\n", 1)[0]
    assert "    if copy0:  # neither contiguous nor row-pitched, or materialised\n        t0 = t0.contiguous()" \
        in launcher
    assert "\n    t0 = t0.contiguous()" not in launcher and "\n    t1 = t1.contiguous()" not in launcher
    mod, rec = _load_recorded(source, tmp_path, "glu_rec")
    x = torch.randn(64, 2 * 160)
    mod.ModelNew()(x)
    mod.ModelNew()(x)  # the second call takes the cached plan
    assert len(rec.calls) == 2 and len(mod._plans_pointwise_sigmoid_mul_0) == 1
    for args, kwargs in rec.calls:
        b, a = args[:2]  # sigmoid reads b (t0), the product a (t1)
        assert a.data_ptr() == x.data_ptr() and b.data_ptr() == x.data_ptr() + 160 * 4  # the halves, no copies
        assert args[4:7] == (160, 320, 320) and _flags(kwargs) == {"PITCHED0": True, "PITCHED1": True}
    # a contiguous input of the same shape takes the flat path of the same kernel
    mod.launch_pointwise_sigmoid_mul_0(torch.randn(64, 160), torch.randn(64, 160))
    assert _flags(rec.calls[-1][1]) == {"PITCHED0": False, "PITCHED1": False}


def test_operands_seen_contiguous_keep_the_plain_kernel(synth: OfflineSynthesizer) -> None:
    """No flag, pitch argument or plan where the example run saw only contiguous operands:
    the extra arguments would cost binder time on every launch for nothing."""
    for name in ("gelu_tanh_chain", "silu_clamp_mul", "relu_scale_add"):
        source = _source(synth, name)
        assert "PITCHED" not in source and "_flat_read" not in source, name
    source = _source(synth, "middle_chunk")  # a, b (middle-dim chunk) have no flag; c, d do
    assert "BLOCK_SIZE: tl.constexpr, PITCHED2: tl.constexpr, PITCHED3: tl.constexpr," in source
    assert "    t0 = t0.contiguous()" in source and "    t1 = t1.contiguous()" in source


def test_launch_decisions(synth: OfflineSynthesizer, tmp_path: Path) -> None:
    """Which operands the launcher reads in place, per spec and input."""
    cases: list[tuple[str, list[torch.Tensor], dict[str, bool]]] = [
        ("glu_3d", [torch.randn(3, 5, 48)], {"PITCHED0": True, "PITCHED1": True}),
        ("glu_3d", [torch.randn(48, 5, 3).permute(2, 1, 0)], {"PITCHED0": False, "PITCHED1": False}),
        ("mixed", [torch.randn(16, 80), torch.randn(16, 40)], {"PITCHED0": True, "PITCHED1": True}),  # b, a; y: no flag
        ("mixed", [torch.randn(80, 6).t(), torch.randn(6, 40)], {"PITCHED0": False, "PITCHED1": False}),
        ("mixed", [torch.randn(3, 80), torch.randn(1, 40)], {"PITCHED0": False, "PITCHED1": False}),
        ("row_offset", [torch.randn(12, 33), torch.randn(12, 33)],
         {"PITCHED0": True, "PITCHED1": True, "PITCHED2": True}),
        ("bias", [torch.randn(10, 48)], {"PITCHED0": True, "PITCHED1": True}),
        ("bias", [torch.randn(48, 7).t()], {"PITCHED0": False, "PITCHED1": False}),
    ]
    for k, (name, inputs, want) in enumerate(cases):
        mod, rec = _load_recorded(_source(synth, name), tmp_path, f"rec_{k}")
        mod.ModelNew()(*inputs)
        ((_, kwargs),) = rec.calls
        assert _flags(kwargs) == want, (name, [tuple(t.stride()) for t in inputs], kwargs)


def test_vec_is_launched_only_without_pitched_operands(synth: OfflineSynthesizer, tmp_path: Path) -> None:
    source = _source(synth, "glu_sigmoid", {"g0.VEC": "4"})
    assert "vec_ok = n % 4 == 0 and not pitched0 and not pitched1" in source
    assert "vec = 4 if vec_ok and t0.data_ptr() % 16 == 0 and t1.data_ptr() % 16 == 0 else 1" in source
    mod, rec = _load_recorded(source, tmp_path, "glu_vec")
    mod.ModelNew()(torch.randn(64, 2 * 160))  # halves: 10240 elements, 16-byte aligned, pitched
    assert rec.calls[-1][1]["VEC"] == 1 and rec.calls[-1][1]["PITCHED0"]
    mod.launch_pointwise_sigmoid_mul_0(torch.randn(64, 160), torch.randn(64, 160))
    assert rec.calls[-1][1]["VEC"] == 4 and not rec.calls[-1][1]["PITCHED0"]


def test_pitched_candidates_are_correct_in_the_interpreter(synth: OfflineSynthesizer) -> None:
    cases: list[tuple[str, dict[str, str] | None]] = [
        ("glu_sigmoid", None),
        ("glu_sigmoid", {"g0.VEC": "4"}),
        ("glu_sigmoid", {"g0.programs": "128", "g0.BLOCK_SIZE": "256"}),
        ("glu_3d", None),
        ("mixed", None),
        ("middle_chunk", None),
        ("row_offset", None),
        ("bias", None),
    ]
    jobs = []
    for k, (name, genome) in enumerate(cases):
        jobs.append({"id": f"{name}#{k}", "spec_source": SPECS.get(name) or example_source(name),
                     "candidate_source": _source(synth, name, genome), "seeds": [3]})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-600:], r["trials"]) for r in results if not r["ok"]]
    assert all(len(r["trials"]) >= 2 for r in results)  # the extra inputs ran too


@pytest.mark.parametrize("name", ["glu_sigmoid"])
def test_judged_by_the_evaluator(name: str, synth: OfflineSynthesizer, judge: Judge) -> None:
    src = example_source(name)
    verdict = judge.evaluate(src, _source(synth, name), name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
