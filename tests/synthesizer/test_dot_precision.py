"""The tl.dot precision knob of matmul, attention and conv groups: tf32x3 by default for
fp32 operands, ieee on request, tf32 only for specs with a loose KE_TOLERANCE, ieee only
(as before) for fp16 operands. The Triton interpreter accepts every choice but computes
the dot in plain fp32 whatever the precision, so the interpreter runs below check that the
candidates are well-formed and correct, not the tensor-core rounding of tf32 / tf32x3."""

from __future__ import annotations

import re

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.emit.precision import dot_precision
from ke_synthesizer.offline.families.matmul.kernel_matmul import MatmulFamily
from ke_synthesizer.offline.plan.plan import Group
from kernelevolve.errors import LoweringError, SynthesisError
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest, Transformation

from .conftest import example_source, lower_example

# fp32 specs with one matmul / attention / conv group (g0)
FP32_SPECS = ["mm_plain", "linear_bias_relu", "sdpa_causal", "conv2d_bias_relu"]
# those eager runs on cuBLAS (no TF32 under the default precision contract)
CUBLAS_SPECS = FP32_SPECS[:3]
LOOSE = '\nKE_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}\nKE_ERROR_BUDGET = False\n'

HALF = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b, q, k, v):
        return torch.mm(a, b), F.scaled_dot_product_attention(q, k, v)


def get_inputs():
    return [torch.randn(32, 48, dtype=torch.float16), torch.randn(48, 16, dtype=torch.float16),
            *(torch.randn(1, 2, 16, 16, dtype=torch.float16) for _ in range(3))]


def get_init_inputs():
    return []
'''


def _precisions(source: str) -> set[str]:
    return set(re.findall(r'input_precision="(\w+)"', source))



@pytest.mark.parametrize("name", CUBLAS_SPECS)
def test_fp32_seed_uses_tf32x3(synth: OfflineSynthesizer, name: str) -> None:
    space = dict(synth.space(example_source(name), name))
    assert space["g0.precision"] == ["tf32x3", "ieee"]  # tf32 is opt-in per spec
    (seed,) = synth.propose(ProposalRequest(spec_source=example_source(name), spec_name=name, count=1))
    assert seed.genome["g0.precision"] == "tf32x3"
    assert _precisions(seed.source) == {"tf32x3"}
    assert "# tf32x3: three TF32 tensor-core products" in seed.source
    ieee, full, _ = lower_example(synth, name, {"g0.precision": "ieee"})
    assert full["g0.precision"] == "ieee"
    assert _precisions(ieee) == {"ieee"} and "tf32" not in ieee
    # tf32 is not a choice of a strict spec: the genome falls back to the default
    strict, full, _ = lower_example(synth, name, {"g0.precision": "tf32"})
    assert full["g0.precision"] == "tf32x3" and _precisions(strict) == {"tf32x3"}


@pytest.mark.parametrize("name", ["linear_tf32_tolerant", "sdpa_causal"])
def test_tf32_only_for_loose_tolerance(synth: OfflineSynthesizer, name: str) -> None:
    src = example_source(name)
    if "KE_TOLERANCE" not in src:
        src += LOOSE
    space = dict(synth.space(src, name))
    assert space["g0.precision"] == ["tf32x3", "ieee", "tf32"]  # the default stays tf32x3
    source, full, _ = lower_example(synth, name, {"g0.precision": "tf32"}, src)
    assert full["g0.precision"] == "tf32" and _precisions(source) == {"tf32"}


# spec -> (contract -> (the seed's precision, the choices offered)): eager's cuDNN takes
# TF32 by default (torch.backends.cudnn.allow_tf32), its cuBLAS does not
CONTRACT_CASES = {
    "conv2d_bias_relu": {"default": ("tf32x3", ["tf32x3", "ieee", "tf32"]), "strict": ("ieee", ["ieee"]),
                         "tf32": ("tf32", ["tf32", "tf32x3", "ieee"])},
    "conv3d_same_residual": {"default": ("tf32x3", ["tf32x3", "ieee", "tf32"]), "strict": ("ieee", ["ieee"]),
                             "tf32": ("tf32", ["tf32", "tf32x3", "ieee"])},
    "linear_bias_relu": {"default": ("tf32x3", ["tf32x3", "ieee"]), "strict": ("ieee", ["ieee"]),
                         "tf32": ("tf32", ["tf32", "tf32x3", "ieee"])},
    "sdpa_causal": {"default": ("tf32x3", ["tf32x3", "ieee"]), "strict": ("ieee", ["ieee"]),
                    "tf32": ("tf32", ["tf32", "tf32x3", "ieee"])},
    "model_gru_encoder": {"default": ("tf32x3", ["tf32x3", "ieee", "tf32"]), "strict": ("ieee", ["ieee"]),
                          "tf32": ("tf32x3", ["tf32x3", "ieee", "tf32"])},
}


@pytest.mark.parametrize("name", sorted(CONTRACT_CASES))
@pytest.mark.parametrize("contract", ["default", "strict", "tf32"])
def test_precision_contract(synth: OfflineSynthesizer, name: str, contract: str) -> None:
    """The request's precision contract decides which dot precisions a group may take and
    the seed's: TF32 offered where eager's library may take it under the contract
    (convolutions by default, seeded only under tf32: cuDNN's own error showed it did not
    take it on an H200), IEEE alone under strict."""
    seed_precision, choices = CONTRACT_CASES[name][contract]
    src = example_source(name)
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1, precision=contract))
    assert seed.genome["g0.precision"] == seed_precision
    assert _precisions(seed.source) >= {seed_precision}
    assert dict(synth.space(src, name, precision=contract))["g0.precision"] == choices
    # a genome naming a precision the contract does not allow falls back to the contract's seed
    src_out, full, _ = synth.lower(synth.captured(src, name), {"g0.precision": "tf32"}, precision=contract)
    assert full["g0.precision"] == ("tf32" if "tf32" in choices else seed_precision)


def test_unknown_contract_is_refused(synth: OfflineSynthesizer) -> None:
    with pytest.raises(SynthesisError, match="precision contract"):
        synth.propose(ProposalRequest(spec_source=example_source("conv2d_bias_relu"), spec_name="c", count=1,
                                      precision="fp64"))


def test_half_operands_keep_ieee(synth: OfflineSynthesizer) -> None:
    space = dict(synth.space(HALF, "half"))
    assert space["g0.precision"] == ["ieee"] and space["g1.precision"] == ["ieee"]  # matmul, attention
    source, full, fallback = lower_example(synth, "half", {"g0.precision": "tf32x3"}, HALF)
    assert not fallback and full["g0.precision"] == "ieee"
    assert _precisions(source) == {"ieee"}
    half_loose = dict(synth.space(HALF + LOOSE, "half_loose"))
    assert half_loose["g0.precision"] == ["ieee", "tf32"]  # as before: no tf32x3 for fp16


def test_precision_change_is_a_recorded_transformation(synth: OfflineSynthesizer) -> None:
    src = example_source("mm_plain")
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name="mm_plain", count=1))
    parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
    children = synth.propose(ProposalRequest(spec_source=src, spec_name="mm_plain", count=100, parent=parent))
    (child,) = [c for c in children if c.transformation.name == "precision"]
    assert child.transformation == Transformation("precision", {"group": "g0", "value": "ieee"})
    assert child.genome["g0.precision"] == "ieee" and _precisions(child.source) == {"ieee"}


def test_unknown_precision_is_rejected() -> None:
    assert dot_precision("ieee") == ("ieee", [])
    with pytest.raises(LoweringError):
        dot_precision("bf16x3")


@pytest.mark.parametrize(("allowed", "default"), [(["tf32x3", "ieee"], "tf32x3"), (["ieee"], "ieee")])
def test_a_missing_precision_is_the_spaces_default(allowed: list[str], default: str) -> None:
    """Generators read a knob the genome lacks as the default the space fills in (one
    table of defaults): tf32x3 for fp32 operands, ieee for fp16 / bf16 ones."""
    group = Group(0, "matmul", [], {}, (), info={"allowed": {"precision": allowed}})
    assert MatmulFamily.value({}, group, "precision") == default
    assert MatmulFamily.value({"g0.precision": "ieee"}, group, "precision") == "ieee"


def test_candidates_are_correct_in_the_interpreter(synth: OfflineSynthesizer) -> None:
    jobs = []
    for name in FP32_SPECS:
        src = example_source(name)
        for precision in ("tf32x3", "ieee"):
            source, full, _ = lower_example(synth, name, {"g0.precision": precision})
            assert full["g0.precision"] == precision
            jobs.append({"id": f"{name}/{precision}", "spec_source": src, "candidate_source": source, "seeds": [3]})
    source, _, _ = lower_example(synth, "linear_tf32_tolerant", {"g0.precision": "tf32"})
    jobs.append({"id": "linear_tf32_tolerant/tf32", "spec_source": example_source("linear_tf32_tolerant"),
                 "candidate_source": source, "seeds": [3]})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-400:], r["trials"]) for r in results if not r["ok"]]


@pytest.mark.parametrize(("tile", "warps"), [(("64", "16", "tf32x3"), "4"), (("64", "16", "ieee"), "8"),
                                             (("32", "16", "tf32x3"), "8"), (("64", "32", "tf32x3"), "8")])
def test_faulty_attention_config_is_never_generated(synth: OfflineSynthesizer, tile: tuple[str, str, str],
                                                    warps: str) -> None:
    """Flash attention at 64 x 16 with tf32x3 faults at 8 warps on a GPU (kernel_attention.py,
    FAULTY_ATTENTION_WARPS): a genome asking for it gets the default warps, and no edge
    leads there; neighbouring configs keep 8 warps."""
    bm, bn, prec = tile
    genome = {"attention": "flash", "g0.BLOCK_M": bm, "g0.BLOCK_N": bn, "g0.precision": prec, "g0.num_warps": "8"}
    source, full, _ = lower_example(synth, "attention_plain", genome)
    assert full["g0.num_warps"] == warps and f"num_warps={warps}" in source
    space = dict(synth.space(example_source("attention_plain"), "attention_plain"))
    assert "8" in space["g0.num_warps"]  # at the seed's tile the choice stays
