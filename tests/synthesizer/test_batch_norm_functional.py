"""Functional batch / instance norm with running statistics as inputs (the ``norm``
family): ``F.batch_norm`` in training and eval mode, the native ops' ``(out, save_mean,
save_invstd[, reserve])`` tuples and ``F.instance_norm``, on odd shapes, lowered to one
Triton kernel (no library call), correct in the interpreter and judged; the kernel writes
the running statistics exactly as torch does, and one that leaves them is judged incorrect
(the evaluator compares inputs after the call with the reference's)."""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.families.norm import kernel_batch_norm
from kernelevolve.ports.synthesis import ProposalRequest

from .test_index_family import lower_and_check


def _spec(body: str, x: str) -> str:
    return "\n".join([
        '"""A functional batch norm case."""', "import torch", "import torch.nn as nn",
        "import torch.nn.functional as F", "", "",
        "class Model(nn.Module):", "    def forward(self, x, rm, rv, w, b):", f"        return {body}", "", "",
        "def get_inputs():", f"    x = {x}", "    c = x.shape[1]",
        "    return [x, torch.randn(c), torch.rand(c) + 0.5, torch.randn(c), torch.randn(c)]", "", "",
        "def get_init_inputs():", "    return []", ""])


CASES: dict[str, str] = {
    "train_3d": _spec("F.batch_norm(x, rm, rv, w, b, training=True, momentum=0.3, eps=1e-3)", "torch.randn(5, 7, 33)"),
    "train_4d_no_affine": _spec("F.batch_norm(x, rm, rv, training=True)", "torch.randn(3, 5, 7, 2) * 4.0 + 3.0"),
    "train_2d_no_stats": _spec("F.batch_norm(x, None, None, w, b, True)", "torch.randn(9, 1)"),
    "eval_5d": _spec("F.batch_norm(x, rm, rv, w, None, False, 0.1, 1e-5)", "torch.randn(2, 3, 1, 4, 5)"),
    "native": _spec("torch.native_batch_norm(x, w, b, rm, rv, True, 0.5, 0.6)", "torch.randn(4, 6, 1000)"),
    "native_legit": _spec("torch._native_batch_norm_legit(x, None, b, rm, rv, True, 0.1, 1e-5)[1:]",
                          "torch.randn(2, 3, 5)"),
    "with_update": _spec("torch.ops.aten._batch_norm_with_update(x, w, b, rm, rv, 0.1, 1e-5)", "torch.randn(7, 2, 3)"),
    "instance": _spec("F.instance_norm(x, rm, rv, w, b, momentum=0.2, eps=1e-4)", "torch.randn(3, 4, 5, 7)"),
    "instance_no_stats": _spec("F.instance_norm(x, weight=w)", "torch.randn(1, 4, 33)"),
}


@pytest.fixture(scope="module")
def lowered(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    return lower_and_check(synth, CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_functional_batch_norm_is_one_correct_triton_kernel(name: str, lowered: dict[str, dict[str, Any]]) -> None:
    prop = lowered[name]["proposal"]
    assert prop.fallback_nodes == ()
    assert prop.source.count("@triton.jit") == 1
    # running statistics written in place exactly where torch writes them (training mode)
    spec = _module(CASES[name])
    inputs = spec.get_inputs()
    ref_in = [t.clone() for t in inputs]
    with torch.no_grad():
        spec.Model()(*ref_in)
    torch_updates = any(not torch.equal(a, b) for a, b in zip(inputs, ref_in, strict=True))
    assert ("rm_ptr + c, " in prop.source) == torch_updates, name
    assert lowered[name]["ok"], lowered[name]["error"][-400:]


@pytest.mark.parametrize("name", ["train_3d", "native", "instance"])
def test_functional_batch_norm_is_judged_correct(name: str, lowered: dict[str, dict[str, Any]], judge: Judge) -> None:
    verdict = judge.evaluate(CASES[name], lowered[name]["proposal"].source, name)
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"


def _module(source: str) -> types.ModuleType:
    mod = types.ModuleType("case")
    exec(compile(source, "<case>", "exec"), mod.__dict__)  # noqa: S102 - our own spec and candidate
    return mod


@pytest.mark.parametrize("name", ["train_3d", "train_4d_no_affine", "native", "with_update", "instance"])
def test_running_statistics_are_written_as_torch_does(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel_batch_norm, "UPDATE_RUNNING_STATS", True)
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=CASES[name], spec_name=name, count=1))
    assert prop.fallback_nodes == () and "rm_ptr + c, " in prop.source
    spec, cand = _module(CASES[name]), _module(prop.source)
    torch.manual_seed(3)
    inputs = spec.get_inputs()
    ref_in = [t.clone() for t in inputs]
    before = inputs[1].clone()
    with torch.no_grad():
        expected = spec.Model()(*ref_in)
        got = cand.ModelNew()(*inputs)
    for a, b in zip(inputs, ref_in, strict=True):  # the running mean and variance, written in place
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert not torch.equal(inputs[1], before)  # the update did happen
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_a_kernel_that_leaves_the_running_statistics_is_incorrect(judge: Judge,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, the evaluator held every candidate to leaving its inputs unchanged: the kernel
    that updated them as torch does was "input 1 was modified in place by the candidate" and
    the one that did not was judged correct though a user's running statistics never moved."""
    monkeypatch.setattr(kernel_batch_norm, "UPDATE_RUNNING_STATS", False)
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=CASES["train_3d"], spec_name="t", count=1))
    verdict = judge.evaluate(CASES["train_3d"], prop.source, "no_update")
    assert verdict.status == "incorrect", verdict.reason
    assert "the reference updates its inputs in place" in verdict.reason
