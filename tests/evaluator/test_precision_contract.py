"""The precision contract (kernelevolve.precision): every verdict names it; ``default`` is
torch's defaults plus what the spec sets at import, honoured in the reference's and the
candidate's runs; ``strict`` is IEEE float32 (the flags every verdict used before); a
candidate that flips a flag is still rejected; one contract's references are never
another's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_evaluator.worker import precision as wp
from kernelevolve.errors import InvalidArgumentError
from kernelevolve.precision import CONTRACTS, Precision, cache_tag, check_name, describe

from .sources import candidate, example

# Sets its own numerics at import, and its reference says which it ran under: x * 2 + 1
# with matmul precision "high" (the spec's own), x * 1 + 1 under "highest" (strict).
FLAG_SPEC = '''
import torch
import torch.nn as nn

torch.set_float32_matmul_precision("high")
torch.backends.cudnn.allow_tf32 = False


class Model(nn.Module):
    def forward(self, x):
        scale = 2.0 if torch.get_float32_matmul_precision() == "high" else 1.0
        return x * scale + 1.0


def get_inputs():
    return [torch.randn(33, 7)]


def get_init_inputs():
    return []
'''

_KERNEL = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _affine(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, x * scale + 1.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _affine[(triton.cdiv(n, 256),)](x, y, n, SCALE, BLOCK=256)
        return y
'''
# Right only under the spec's own flags (its reference scales by 2 there).
FIXED_2X = _KERNEL.replace("SCALE", "2.0")
# Right under any contract if, and only if, it runs under the same flags as the reference.
READS_FLAGS = _KERNEL.replace("SCALE", '(2.0 if torch.get_float32_matmul_precision() == "high" else 1.0)')

# Turns cuDNN's TF32 off inside its forward (the name is built so that only the runtime
# check can see it).
CUDNN_FLIP = candidate("ok_relu_scale_add").replace(
    "        x = x.contiguous()\n",
    "        setattr(torch.backends.cudnn, 'allow_' + 'tf32', False)\n        x = x.contiguous()\n")


# -- the names ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", None, "default", "STRICT", " tf32 "])
def test_check_name_accepts_the_three_contracts(name: str | None) -> None:
    assert check_name(name) in CONTRACTS


@pytest.mark.parametrize("name", ["ieee", "fp32", "tf32x", "high"])
def test_check_name_refuses_others(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="precision must be one of"):
        check_name(name)


def test_cache_tags_differ_by_contract() -> None:
    tags = {cache_tag(n) for n in CONTRACTS}
    assert len(tags) == 3
    assert cache_tag("") == cache_tag("default")


def test_record_round_trips_and_describes_the_flags() -> None:
    rec = Precision("default", {"cuda.matmul.allow_tf32": "False", "cudnn.allow_tf32": "True",
                                "float32_matmul_precision": "highest"}, {"cudnn.benchmark": "True"})
    again = Precision.from_dict(rec.to_dict())
    assert again == rec
    text = rec.describe()
    assert text.startswith("default (")
    assert "matmul TF32 off" in text and "cuDNN TF32 on" in text and "the spec set cudnn.benchmark=True" in text
    assert rec.tf32_cudnn is True and rec.tf32_matmul is False
    assert "IEEE" in describe("strict")


# -- the worker's flags, in this process ------------------------------------------------------
@pytest.fixture
def fresh_worker_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The worker module's state as a fresh worker has it; this process's flags restored after."""
    saved = wp.read_flags()
    monkeypatch.setattr(wp, "_defaults", None)
    monkeypatch.setattr(wp, "_import_flags", {})
    monkeypatch.setattr(wp, "_job", None)
    try:
        yield
    finally:
        wp.apply_flags(saved)


# What a spec may write at import: legacy flags, the per-op API of torch >= 2.9, both mixed.
SPEC_SETTINGS = [
    ("torch.backends.cudnn.allow_tf32 = False", {"cudnn.allow_tf32": "False"}),
    ('torch.set_float32_matmul_precision("high")', {"float32_matmul_precision": "high"}),
    ('torch.set_float32_matmul_precision("medium")', {"float32_matmul_precision": "medium"}),
    ("torch.backends.cuda.matmul.allow_tf32 = True", {"cuda.matmul.allow_tf32": "True"}),
    ("torch.backends.cudnn.benchmark = True", {"cudnn.benchmark": "True"}),
]
if hasattr(torch._C, "_get_fp32_precision_getter"):
    SPEC_SETTINGS += [
        ('torch.backends.cudnn.conv.fp32_precision = "ieee"', {"fp32_precision.cuda.conv": "ieee"}),
        ('torch.backends.fp32_precision = "tf32"', {"fp32_precision.generic.all": "tf32"}),
    ]


@pytest.mark.usefixtures("fresh_worker_state")
@pytest.mark.parametrize(("statement", "expected"), SPEC_SETTINGS, ids=[s for s, _ in SPEC_SETTINGS])
def test_default_contract_is_what_the_spec_set_at_import(statement: str, expected: dict[str, str]) -> None:
    defaults = wp.capture_defaults()
    wp.import_spec(lambda: exec(f"import torch\n{statement}"), "sha-a")  # noqa: S102 - the spec's import
    contract = wp.enter_job("default", "sha-a")
    assert contract.name == "default"
    for key, value in expected.items():
        assert contract.flags[key] == value
        assert contract.spec_flags[key] == value
    assert wp.read_flags() == contract.flags  # applied, every readable flag as recorded
    # strict overrides the spec's numerics, keeps its cuDNN algorithm choice
    strict = wp.enter_job("strict", "sha-a")
    assert strict.flags["float32_matmul_precision"] == "highest"
    assert strict.flags["cuda.matmul.allow_tf32"] == "False" and strict.flags["cudnn.allow_tf32"] == "False"
    assert strict.flags["cudnn.benchmark"] == contract.flags["cudnn.benchmark"]
    # and the next job of the spec gets the spec's flags back, exactly
    assert wp.enter_job("default", "sha-a").flags == contract.flags
    # another spec imported later starts from torch's defaults, not from this one's flags
    wp.import_spec(lambda: None, "sha-b")
    other = wp.enter_job("default", "sha-b")
    assert other.spec_flags == {}
    assert other.flags == defaults


@pytest.mark.usefixtures("fresh_worker_state")
def test_strict_is_the_flags_every_verdict_used_before_contracts() -> None:
    wp.capture_defaults()
    wp.import_spec(lambda: None, "sha")
    strict = wp.enter_job("strict", "sha")
    assert (strict.flags["cuda.matmul.allow_tf32"], strict.flags["cudnn.allow_tf32"],
            strict.flags["float32_matmul_precision"]) == ("False", "False", "highest")
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cudnn.allow_tf32 is False and torch.backends.cuda.matmul.allow_tf32 is False
    tf32 = wp.enter_job("tf32", "sha")
    assert (tf32.flags["cuda.matmul.allow_tf32"], tf32.flags["cudnn.allow_tf32"],
            tf32.flags["float32_matmul_precision"]) == ("True", "True", "high")
    default = wp.enter_job("default", "sha")
    # torch's own defaults: cuDNN TF32 on, matmul TF32 off
    assert (default.flags["cuda.matmul.allow_tf32"], default.flags["cudnn.allow_tf32"],
            default.flags["float32_matmul_precision"]) == ("False", "True", "highest")


# -- verdicts from a real judge (CPU worker, Triton interpreter) --------------------------------
def _flags(v: object) -> dict[str, str]:
    rec = getattr(v, "precision", None)
    assert rec is not None, "every verdict names its precision contract"
    return rec.flags


@pytest.mark.parametrize(("cand", "status"), [("ok_relu_scale_add", "correct"), ("wrong_math", "incorrect"),
                                              ("tf32_flip", "rejected"), ("syntax_error", "compile_error")])
def test_every_verdict_names_its_contract(judge: Judge, cand: str, status: str) -> None:
    v = judge.evaluate(example("relu_scale_add"), candidate(cand), candidate_id=cand)
    assert v.status == status, v.reason
    assert v.precision is not None and v.precision.name == "default"
    back = type(v).from_dict(v.to_dict())
    assert back.precision == v.precision
    assert v.to_dict()["precision"]["description"].startswith("default")
    if status in ("correct", "incorrect"):  # the worker read them: torch's defaults, nothing of the spec's
        assert _flags(v)["cudnn.allow_tf32"] == "True" and _flags(v)["cuda.matmul.allow_tf32"] == "False"
        assert v.precision.spec_flags == {}


def test_strict_restores_the_flags_of_old(judge: Judge) -> None:
    v = judge.evaluate(example("relu_scale_add"), candidate("ok_relu_scale_add"), "strict", precision="strict")
    assert v.status == "correct", v.reason
    assert v.precision is not None and v.precision.name == "strict"
    assert (_flags(v)["cuda.matmul.allow_tf32"], _flags(v)["cudnn.allow_tf32"],
            _flags(v)["float32_matmul_precision"]) == ("False", "False", "highest")


def test_a_spec_setting_its_own_flags_is_honoured_in_reference_and_candidate(judge: Judge) -> None:
    # default: the spec's "high" holds for its reference (x*2+1) ...
    v = judge.evaluate(FLAG_SPEC, FIXED_2X, "fixed-default")
    assert v.status == "correct", v.reason
    assert v.precision is not None
    assert v.precision.spec_flags["float32_matmul_precision"] == "high"
    assert v.precision.spec_flags["cudnn.allow_tf32"] == "False"
    assert "the spec set" in v.precision.describe()
    # ... and for the candidate's run: one that reads the flags computes what the reference did
    assert judge.evaluate(FLAG_SPEC, READS_FLAGS, "reads-default").status == "correct"
    # strict overrides the spec: its reference is x*1+1 now (a reference cached under the
    # default contract in this same worker must not be reused), the candidate sees it too
    s = judge.evaluate(FLAG_SPEC, FIXED_2X, "fixed-strict", precision="strict")
    assert s.status == "incorrect", s.reason
    assert s.precision is not None and s.precision.flags["float32_matmul_precision"] == "highest"
    assert judge.evaluate(FLAG_SPEC, READS_FLAGS, "reads-strict", precision="strict").status == "correct"
    # the next spec in these workers is judged from torch's defaults, not from this spec's flags
    after = judge.evaluate(example("relu_scale_add"), candidate("ok_relu_scale_add"), "after")
    assert after.precision is not None and after.precision.spec_flags == {}
    assert after.precision.flags["float32_matmul_precision"] == "highest"


@pytest.mark.parametrize("contract", ["default", "tf32"])
def test_a_candidate_flipping_a_flag_is_still_rejected(runtime_judge: Judge, contract: str) -> None:
    v = runtime_judge.evaluate(example("relu_scale_add"), CUDNN_FLIP, "cudnn-flip", precision=contract)
    assert v.status == "rejected", v.reason
    assert "cudnn.allow_tf32" in v.reason
    assert v.precision is not None and v.precision.name == contract


def test_unknown_contract_is_misuse(judge: Judge) -> None:
    with pytest.raises(InvalidArgumentError):
        judge.evaluate(example("relu_scale_add"), candidate("ok_relu_scale_add"), "x", precision="ieee")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_the_contract_on_a_gpu(tmp_path_factory: pytest.TempPathFactory) -> None:
    from ke_evaluator.judge import EvalOptions, TimingOptions

    opts = EvalOptions(device="cuda", correctness_trials=2, timing=TimingOptions(max_trials=20),
                       scratch_dir=str(tmp_path_factory.mktemp("gpu-precision")))
    with Judge(opts) as gpu:
        v = gpu.evaluate(example("relu_scale_add"), candidate("ok_relu_scale_add"), "gpu-default")
        assert v.status == "correct" and v.precision is not None, v.reason
        flags = v.precision.flags
        assert flags["cudnn.allow_tf32"] == "True" and flags["cuda.matmul.allow_tf32"] == "False"
        s = gpu.evaluate(example("relu_scale_add"), candidate("ok_relu_scale_add"), "gpu-strict", precision="strict")
        assert s.status == "correct" and s.precision is not None and s.precision.flags["cudnn.allow_tf32"] == "False"
        assert gpu.evaluate(FLAG_SPEC, FIXED_2X, "gpu-fixed").status == "correct"
        assert gpu.evaluate(FLAG_SPEC, FIXED_2X, "gpu-fixed-strict", precision="strict").status == "incorrect"
        assert gpu.evaluate(FLAG_SPEC, READS_FLAGS, "gpu-reads-tf32", precision="tf32").status == "correct"
