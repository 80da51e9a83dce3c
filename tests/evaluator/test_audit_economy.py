"""The arithmetic audit's economy (worker/arithmetic_audit.py, "Economy"), judged: a
candidate whose first computing launches reach the output passes without the rest being
analysed; one whose first computing launches are decoys falls back to the full audit, which
decides (rejects a copy of a library result, accepts an honest kernel launched after the
decoys). The exploit candidates of test_adversarial.py keep their verdicts and reasons."""

from __future__ import annotations

import re

import pytest

from ke_evaluator.judge import Judge

from .sources import candidate, example

RELU = "relu_scale_add"

KERNELS = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.5, mask=mask)


@triton.jit
def _add_bias(x_ptr, b_ptr, y_ptr, n, n_cols, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = tl.load(b_ptr + offs % n_cols, mask=mask)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + b, mask=mask)


@triton.jit
def _copy_mixed(src_ptr, d1_ptr, d2_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    d = tl.load(d1_ptr + offs, mask=mask) + tl.load(d2_ptr + offs, mask=mask)
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask) + 0.0 * d, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        x = x.contiguous()
        n = x.numel()
        grid = (triton.cdiv(n, 4096),)
'''

# three kernels, each computing: the first two are evidence enough, the third runs plainly
CHAIN = KERNELS + '''
        h = torch.empty_like(x)
        _relu[grid](x, h, n, BLOCK=4096)
        s = torch.empty_like(x)
        _scale[grid](h, s, n, BLOCK=4096)
        y = torch.empty_like(x)
        _add_bias[grid](s, self.bias, y, n, x.shape[-1], BLOCK=4096)
        return y
'''

# two decoys launched first (computing into buffers the output never needs), then ...
DECOYS = KERNELS + '''
        d1 = torch.empty_like(x)
        _relu[grid](x, d1, n, BLOCK=4096)
        d2 = torch.empty_like(x)
        _scale[grid](d1, d2, n, BLOCK=4096)
'''
# ... a copy of the library's result (0 * decoy keeps the decoys "used")
DECOYS_THEN_COPY = DECOYS + '''
        h = (torch.relu(x) * 2.5 + self.bias).contiguous()
        y = torch.empty_like(h)
        _copy_mixed[grid](h, d1, d2, y, n, BLOCK=4096)
        return y
'''
# ... or the honest last step on the decoys' values (they are the operator's own after all)
DECOYS_THEN_BIAS = DECOYS + '''
        y = torch.empty_like(x)
        _add_bias[grid](d2, self.bias, y, n, x.shape[-1], BLOCK=4096)
        return y
'''
# ... or recomputing everything from x in one honest kernel
DECOYS_THEN_HONEST = DECOYS + '''
        y = torch.empty_like(x)
        _relu[grid](x, y, n, BLOCK=4096)
        _scale[grid](y, y, n, BLOCK=4096)
        _add_bias[grid](y, self.bias, y, n, x.shape[-1], BLOCK=4096)
        return y
'''


def test_an_honest_chain_passes_on_its_first_computing_launches(judge: Judge) -> None:
    v = judge.evaluate(example(RELU), CHAIN, candidate_id="chain")
    assert v.status == "correct", v.reason
    audit = v.evidence["kernel_arithmetic"]
    assert audit["audit"].startswith("economical: 2 of 3 launches analysed"), audit
    assert audit["computing"] == 2 and audit["computed_values_reach_output"] is True


def test_decoys_first_then_a_copy_fall_back_to_the_full_audit_which_rejects(judge: Judge) -> None:
    v = judge.evaluate(example(RELU), DECOYS_THEN_COPY, candidate_id="decoys_copy")
    assert v.status == "rejected" and "do not reach the output" in v.reason, v.reason
    audit = v.evidence["kernel_arithmetic"]
    assert audit["audit"] == "full after the economical pass"
    assert audit["analysed"] == audit["launches"] == 3 and audit["computing"] == 2


@pytest.mark.parametrize(("source", "how"), [(DECOYS_THEN_BIAS, "economical: 2 of 3"),
                                             (DECOYS_THEN_HONEST, "economical: 2 of 5 launches analysed (of the last")])
def test_computing_after_the_decoys_is_judged_as_the_full_audit_judges_it(judge: Judge, source: str,
                                                                         how: str) -> None:
    """The decoys' values flow into the last kernel: the economical pass sees them reach the
    output. Recomputed from x instead: the tail pass (the last launches, test_audit_tail.py)
    finds the later computing launches, as the full audit did."""
    v = judge.evaluate(example(RELU), source, candidate_id="decoys_then")
    assert v.status == "correct", v.reason
    assert v.evidence["kernel_arithmetic"]["audit"].startswith(how), v.evidence["kernel_arithmetic"]


# a forward that raises on values no relu writes: the replaced ones
RAISES_ON_REPLACED = KERNELS + '''
        h = torch.empty_like(x)
        _relu[grid](x, h, n, BLOCK=4096)
        if bool((h < -3.0).any()):
            raise RuntimeError("negative activations")
        y = torch.empty_like(x)
        _scale[grid](h, y, n, BLOCK=4096)
        _add_bias[grid](y, self.bias, y, n, x.shape[-1], BLOCK=4096)
        return y
'''


def test_a_forward_that_raises_in_the_economical_pass_is_decided_by_the_full_audit(judge: Judge) -> None:
    v = judge.evaluate(example(RELU), RAISES_ON_REPLACED, candidate_id="raises")
    assert v.status == "correct", v.reason
    audit = v.evidence["kernel_arithmetic"]
    assert audit["audit"] == "full after the economical pass" and audit["analysed"] == 3, audit
    assert audit["computed_values_reach_output"] == "raises without them"


@pytest.mark.parametrize("name", ["decoy_compute_plus_copy", "library_forward_copy_kernel",
                                  "library_forward_transpose_kernel", "ok_relu_scale_add"])
def test_economy_on_or_off_the_same_verdict_and_reason(judge: Judge, full_audit_judge: Judge, name: str) -> None:
    on = judge.evaluate(example(RELU), candidate(name), candidate_id=name)
    off = full_audit_judge.evaluate(example(RELU), candidate(name), candidate_id=name)
    # the judges' seeds differ, and so do the counts and shares in a reason
    assert (on.status, _digitless(on.reason)) == (off.status, _digitless(off.reason))
    assert off.evidence["kernel_arithmetic"]["audit"] == "full"


def _digitless(reason: str) -> str:
    return re.sub(r"[0-9][0-9.e+-]*", "#", reason)
