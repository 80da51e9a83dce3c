"""Scans in the spellings people write: inclusive, reverse (``flip -> scan -> flip``,
also as methods), exclusive (``cumsum - x``, ``cat`` with zeros, ``F.pad``), cummax /
cummin values, along any dim: each group is one Triton row-scan kernel, correct on odd
sizes and with rows longer than one chunk."""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import lower_example

SCANS = '''"""Scans: reverse, exclusive and running max / min in several spellings."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        rev = x.flip(0).cumsum(0).flip(0)  # reverse scan over dim 0, method spelling
        excl = torch.cat([torch.zeros_like(x[:, :1]), torch.cumsum(x, dim=1)[:, :-1]], dim=1)
        padded = F.pad(torch.cumsum(y, -1)[..., :-1], (1, 0))  # exclusive, last dim of 3-D
        run_max = torch.cummax(y, dim=1)[0]  # mid dim
        run_min = y.flip(-1).cummin(-1).values.flip(-1)  # reverse running minimum
        rprod = torch.flip(torch.cumprod(torch.flip(1.0 + 0.01 * x, dims=[1]), dim=1), dims=[1])
        return rev, excl, padded, run_max + 1.0, run_min, rprod


def get_inputs():
    return [torch.randn(13, 37), torch.randn(2, 7, 11)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 5), torch.randn(1, 1, 3)]]
'''

LONG_ROWS = '''"""Running max / exclusive sums over rows longer than a chunk."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.cummax(x, 1).values, torch.cummin(x * 2.0, 1)[0], x.cumsum(1) - x


def get_inputs():
    return [torch.randn(3, 211)]


def get_init_inputs():
    return []
'''


def _propose(synth: OfflineSynthesizer, src: str, name: str):  # type: ignore[no-untyped-def]
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    return prop


def test_scan_spellings_are_one_triton_scan_each(synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, SCANS, "scans")
    assert prop.fallback_nodes == ()  # no flip, cat, pad, cummax or cummin library call
    assert "library call" not in prop.source
    assert "tl.associative_scan(" in prop.source and "reverse=True" in prop.source
    (result,) = run_in_subprocess([{"id": "scans", "spec_source": SCANS, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])


# forward and reverse scans of one input share a kernel that keeps whole rows in registers
REVERSE_ROWS = LONG_ROWS.replace("torch.cummin(x * 2.0, 1)[0]", "(x * 2.0).flip(1).cummin(1)[0].flip(1)")


@pytest.mark.parametrize(("strategy", "src"), [("single", LONG_ROWS), ("looped", LONG_ROWS),
                                               ("single", REVERSE_ROWS)])
def test_scans_over_long_rows_in_chunks(synth: OfflineSynthesizer, strategy: str, src: str) -> None:
    _, full, _ = lower_example(synth, "long_scans", {}, src)
    genome = {**full, **{k: strategy for k in full if k.endswith(".strategy")},
              **{k: "64" for k in full if k.endswith(".BLOCK_N")}}
    source, _, fallback = lower_example(synth, "long_scans", genome, src)
    assert fallback == ()
    assert ("carry_" in source) is (strategy == "looped")  # chunks carry the running value
    (result,) = run_in_subprocess([{"id": strategy, "spec_source": src, "candidate_source": source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])


def test_cummax_indices_stay_a_library_call(synth: OfflineSynthesizer) -> None:
    src = LONG_ROWS.replace("return torch.cummax(x, 1).values,", "return torch.cummax(x, 1)[1],")
    assert src != LONG_ROWS
    prop = _propose(synth, src, "cummax_indices")
    assert prop.fallback_nodes == ("cummax",)  # indices are integers: torch's semantics kept


def test_scan_candidate_is_judged_correct(synth: OfflineSynthesizer, judge: Judge) -> None:
    prop = _propose(synth, SCANS, "scans")
    verdict = judge.evaluate(SCANS, prop.source, "scans")
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert verdict.evidence["kernel_launches"]
