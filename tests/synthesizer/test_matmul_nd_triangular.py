"""Matmul family: N-d batched matmuls (4-D / 5-D / 6-D, broadcast and permuted batch
dims, einsum) read their operands in place through three batch levels, and triangular
matmuls (``tril(a @ b)``, ``triu(...)``, ``tril(a) @ b``) are one masked matmul kernel
that skips the zero tiles and K ranges (knob ``TRI_SKIP``), correct on odd sizes."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import lower_example

BATCHED = '''"""N-d batched matmuls: broadcast 5-D batch, permuted 4-D operand, einsum, matvec."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, q, k, v):
        x = torch.matmul(a, b)  # [2, 1, 3, 7, 5] @ [1, 4, 3, 5, 6]: broadcast batch
        y = torch.relu(q.permute(0, 2, 1, 3) @ k.transpose(-1, -2))  # permuted operands
        z = torch.einsum("bhqd,bhkd->bhqk", q.transpose(1, 2), v) * 0.5
        w = k @ v[0, 0, 0]  # batched matrix-vector
        return x, y, z, w


def get_inputs():
    return [torch.randn(2, 1, 3, 7, 5), torch.randn(1, 4, 3, 5, 6), torch.randn(2, 11, 3, 13),
            torch.randn(2, 3, 5, 13), torch.randn(2, 3, 5, 13)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 1, 3, 2), torch.randn(3, 1, 1, 2, 1), torch.randn(1, 2, 1, 17),
             torch.randn(1, 1, 1, 17), torch.randn(1, 1, 1, 17)]]
'''

TRIANGULAR = '''"""Triangular matmuls: masked products and triangular operands, odd sizes."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, c, s):
        p = torch.tril(a @ b)  # [37, 23] @ [23, 41]
        q = torch.triu(torch.bmm(c, c.transpose(1, 2)), diagonal=2) + 1.0  # batched, epilogue
        r = torch.tril(s, -1) @ b[:19, :]  # strictly lower triangular operand
        t = torch.relu(a @ b.triu(-3))  # upper triangular second operand
        u = s.triu() @ s.t()  # upper triangular first operand
        return p, q, r, t, u


def get_inputs():
    return [torch.randn(37, 23), torch.randn(23, 41), torch.randn(3, 29, 7), torch.randn(19, 19)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(5, 1), torch.randn(1, 3), torch.randn(1, 2, 5), torch.randn(1, 1)]]
'''

# small tiles: many tiles per problem, so whole tiles and K ranges are skipped
SMALL_TILES = {"BLOCK_M": "16", "BLOCK_N": "16", "BLOCK_K": "16"}


def _propose(synth: OfflineSynthesizer, src: str, name: str) -> Any:
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    return prop


def _small_tiles(synth: OfflineSynthesizer, src: str, name: str, skip: str) -> tuple[str, tuple[str, ...]]:
    _, full, _ = lower_example(synth, name, {}, src)
    genome = dict(full)
    for key in full:
        group, _, knob = key.partition(".")
        if knob in SMALL_TILES:
            genome[key] = SMALL_TILES[knob]
        if knob == "TRI_SKIP":
            genome[key] = skip
    source, _, fallback = lower_example(synth, name, genome, src)
    return source, fallback


def test_nd_batched_matmuls_are_lowered_and_correct(synth: OfflineSynthesizer) -> None:
    prop = _propose(synth, BATCHED, "nd_batched")
    assert prop.fallback_nodes == ()  # einsum included
    assert prop.source.count("def launch_matmul_") == 4
    assert "_batch3(" in prop.source
    (result,) = run_in_subprocess([{"id": "nd", "spec_source": BATCHED, "candidate_source": prop.source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])
    assert [t["kind"] for t in result["trials"]].count("extra") == 1  # size-1 dims, other broadcasts


@pytest.mark.parametrize(("a_shape", "b_shape", "copies"), [
    ((2, 1, 3, 7, 5), (1, 4, 3, 5, 6), False),  # broadcast dims read at stride 0
    ((2, 3, 4, 7, 5), (5, 6), False),  # a 2-D second operand broadcasts over 3 batch dims
    ((2, 3, 1, 7, 5), (1, 3, 4, 5, 6), False),  # two runs: [2, 3] (a) and [4] (b)
    ((2, 1, 3, 1, 7, 5), (1, 2, 1, 2, 5, 6), True),  # 6-D, alternating broadcasts: four runs
    ((2, 1, 3, 1, 2, 7, 5), (1, 2, 3, 2, 1, 5, 6), True),  # four batch runs: only then a copy
])
def test_batch_views_read_in_place(synth: OfflineSynthesizer, a_shape: tuple[int, ...],
                                   b_shape: tuple[int, ...], copies: bool) -> None:
    src = BATCHED.replace("torch.randn(2, 1, 3, 7, 5), torch.randn(1, 4, 3, 5, 6)",
                          f"torch.randn{a_shape}, torch.randn{b_shape}")
    prop = _propose(synth, src, "nd_views")
    namespace: dict[str, Any] = {}
    exec(compile(prop.source, "<candidate>", "exec"), namespace)  # noqa: S102 - our own candidate
    plan_fn = next(v for k, v in namespace.items() if re.fullmatch(r"_plan_matmul_\w+", k))
    a, b = torch.randn(a_shape), torch.randn(b_shape)
    out_shape, same, grid, *_ = plan_fn(a, b)
    assert out_shape == torch.matmul(a, b).shape
    assert same is not copies  # views share the caller's memory unless the batch cannot fold


@pytest.mark.parametrize("skip", ["skip", "mask"])
def test_triangular_matmuls_skip_tiles_and_are_correct(synth: OfflineSynthesizer, skip: str) -> None:
    prop = _propose(synth, TRIANGULAR, "triangular")
    assert prop.fallback_nodes == ()  # no tril / triu library call left
    assert prop.source.count("def launch_matmul_") == 5
    assert "library call" not in prop.source
    source, fallback = _small_tiles(synth, TRIANGULAR, "triangular", skip)
    assert fallback == ()
    assert ("no K iteration" in source) is (skip == "skip")
    (result,) = run_in_subprocess([{"id": skip, "spec_source": TRIANGULAR, "candidate_source": source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])


def test_triangular_knob_is_offered_only_for_triangular_problems(synth: OfflineSynthesizer) -> None:
    tri = synth.space(TRIANGULAR, "triangular")
    assert any(k.endswith(".TRI_SKIP") and v == ["skip", "mask"] for k, v in tri)
    assert not any(k.endswith(".SPLIT_K") for k, _ in tri)  # the masks act on whole sums
    plain = synth.space(BATCHED, "nd_batched")
    assert not any(k.endswith(".TRI_SKIP") for k, _ in plain)


def test_half_precision_triangular_matmul(synth: OfflineSynthesizer) -> None:
    src = TRIANGULAR.replace("def get_inputs():\n    return [",
                             "def get_inputs():\n    return [t.half() for t in [").replace(
        "torch.randn(19, 19)]\n\n\ndef get_init", "torch.randn(19, 19)]]\n\n\ndef get_init").split(
        "\n\ndef get_extra_inputs")[0] + "\n"
    prop = _propose(synth, src, "triangular_half")
    assert prop.fallback_nodes == ()
    (result,) = run_in_subprocess([{"id": "half", "spec_source": src, "candidate_source": prop.source,
                                    "seeds": [1], "atol": 5e-2, "rtol": 5e-2}])
    assert result["ok"], (result["error"][-800:], result["trials"])


def test_triangular_candidate_is_judged_correct(synth: OfflineSynthesizer, judge: Judge) -> None:
    prop = _propose(synth, TRIANGULAR, "triangular")
    verdict = judge.evaluate(TRIANGULAR, prop.source, "triangular")
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    assert verdict.evidence["kernel_launches"]


def test_batch_read_knob_is_offered_only_for_batched_products(synth: OfflineSynthesizer) -> None:
    batched = synth.space(BATCHED, "nd_batched")
    # x, y and z keep a batch grid; w (matrix-vector) folds its batch into rows
    assert sum(k.endswith(".BATCH_READ") and v == ["in_place", "contiguous"] for k, v in batched) == 3
    two_d = synth.space(TRIANGULAR.replace("torch.bmm(c, c.transpose(1, 2))", "c[0] @ c[0].t()"), "two_d")
    assert not any(k.endswith(".BATCH_READ") for k, _ in two_d)  # no batch grid dimension: nothing to read


@pytest.mark.parametrize("batch_read", ["in_place", "contiguous"])
def test_batch_read_contiguous_copies_permuted_operands_and_stays_correct(synth: OfflineSynthesizer,
                                                                          batch_read: str) -> None:
    _, full, _ = lower_example(synth, "nd_batched", {}, BATCHED)
    genome = {k: (batch_read if k.endswith(".BATCH_READ") else v) for k, v in full.items()}
    source, used, fallback = lower_example(synth, "nd_batched", genome, BATCHED)
    assert fallback == () and all(v == batch_read for k, v in used.items() if k.endswith(".BATCH_READ"))
    assert ("a = a.contiguous()" in source) is (batch_read == "contiguous")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<candidate>", "exec"), namespace)  # noqa: S102 - our own candidate
    q, k = torch.randn(2, 11, 3, 13), torch.randn(2, 3, 5, 13)
    # the permuted product of the spec, q.permute(0, 2, 1, 3) @ k^T (its relu epilogue names
    # it): in place reads the caller's memory, contiguous works on copies
    plan_fn = namespace["_plan_matmul_matmul_relu_1"]
    out_shape, same, *_ = plan_fn(q.permute(0, 2, 1, 3), k.transpose(-1, -2))
    assert out_shape == (2, 3, 11, 5)
    assert same is (batch_read == "in_place")
    (result,) = run_in_subprocess([{"id": batch_read, "spec_source": BATCHED, "candidate_source": source,
                                    "seeds": [1]}])
    assert result["ok"], (result["error"][-800:], result["trials"])
