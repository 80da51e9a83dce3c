"""Masked attention as one flash kernel: SDPA's boolean / additive ``attn_mask`` of every
broadcastable shape, and the plain-op idioms (``masked_fill(m, -inf)``, ``masked_fill(m ==
0, ...)``, ``where``, ``scores + mask``, a GPT causal buffer sliced to ``[:, :, :T, :T]``)
lower to a single kernel that never writes the scores; correct in the interpreter on odd
shapes (L, S not multiples of the block, S != L, head dims 40 and 72, fp32 and fp16),
fully masked rows as torch gives them (SDPA zeros, a softmax chain NaN)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
import torch.fx
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.frontend import real_state
from ke_synthesizer.offline.frontend.attention_chain import AttentionMask, prove_causal
from ke_synthesizer.offline.frontend.capture import LARGE_BYTES
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import STYLES_DIR, example_source

HEADER = '''"""{what}"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

{tolerance}
class Model(nn.Module):
    def __init__(self{init_args}):
        super().__init__()
{init}
    def forward(self, {params}):
{body}


def get_inputs():
{inputs}


def get_init_inputs():
    return [{init_inputs}]


def get_extra_inputs():
{extra}
'''


def _spec(what: str, params: str, body: str, inputs: str, extra: str, init: str = "", init_args: str = "",
          init_inputs: str = "", tolerance: str = "") -> str:
    def block(text: str, indent: int) -> str:
        return "\n".join(" " * indent + line if line else line for line in text.strip("\n").splitlines())

    return HEADER.format(what=what, params=params, body=block(body, 8), inputs=block(inputs, 4),
                         extra=block(extra, 4), init=block(init, 8) + "\n" if init else "",
                         init_args=init_args, init_inputs=init_inputs,
                         tolerance=f"KE_TOLERANCE = {tolerance}\n\n" if tolerance else "")


def _qkv(b: int, h: int, lq: int, lk: int, d: int, dtype: str = "torch.float32") -> str:
    return (f"torch.randn({b}, {h}, {lq}, {d}, dtype={dtype}), torch.randn({b}, {h}, {lk}, {d}, dtype={dtype}), "
            f"torch.randn({b}, {h}, {lk}, {d}, dtype={dtype})")


# SDPA, boolean padding mask per batch [B, 1, 1, S]; batch 1 has no key at all (zeros)
SDPA_PADDING = _spec(
    "SDPA with a boolean key padding mask per batch element.", "q, k, v, keep",
    "return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)",
    f"keep = torch.rand(3, 1, 1, 29) > 0.3\nkeep[1] = False\nreturn [{_qkv(3, 2, 37, 29, 40)}, keep]",
    f"keep = torch.rand(1, 1, 1, 70) > 0.5\nreturn [[{_qkv(1, 3, 5, 70, 40)}, keep]]")

# SDPA, additive float mask [L, S] with -inf and finite entries; row 2 all -inf (zeros)
SDPA_ADDITIVE = _spec(
    "SDPA with an additive float mask shared by every batch and head.", "q, k, v, bias",
    "return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.3)",
    "bias = torch.randn(19, 45)\nbias[torch.rand(19, 45) > 0.6] = float('-inf')\nbias[2] = float('-inf')\n"
    f"return [{_qkv(2, 3, 19, 45, 72)}, bias]",
    f"bias = torch.randn(33, 17)\nreturn [[{_qkv(1, 1, 33, 17, 72)}, bias]]")

# SDPA, a full boolean mask [B, H, L, S] in fp16
SDPA_FULL_HALF = _spec(
    "SDPA with a full boolean mask in half precision.", "q, k, v, keep",
    "return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)",
    f"keep = torch.rand(2, 2, 23, 41) > 0.4\nreturn [{_qkv(2, 2, 23, 41, 40, 'torch.float16')}, keep]",
    f"keep = torch.rand(1, 3, 9, 65) > 0.4\nreturn [[{_qkv(1, 3, 9, 65, 40, 'torch.float16')}, keep]]",
    tolerance='{"atol": 2e-2, "rtol": 2e-2}')

# masked_fill(mask == 0, -inf) with an integer padding mask input; batch 0, row-wise:
# keys all dropped for batch 0 -> the softmax of an all -inf row is NaN
MASKED_FILL_EQ0 = _spec(
    "masked_fill(mask == 0, -inf) with a 0/1 padding mask input, then softmax and @ v.", "q, k, v, mask",
    """scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
scores = scores.masked_fill(mask == 0, float("-inf"))
return F.softmax(scores, dim=-1) @ v""",
    f"mask = (torch.rand(2, 1, 1, 50) > 0.3).long()\nmask[0] = 0\nreturn [{_qkv(2, 4, 21, 50, 40)}, mask]",
    f"mask = (torch.rand(3, 1, 1, 7) > 0.2).long()\nmask[..., 0] = 1\nreturn [[{_qkv(3, 4, 66, 7, 40)}, mask]]")

# scores * scale + mask, an additive mask of -1e9 entries [B, 1, L, S]
ADDITIVE_PLAIN = _spec(
    "Scores plus an additive -1e9 mask input before the softmax.", "q, k, v, mask",
    """att = torch.matmul(q, k.transpose(-1, -2)) * 0.125 + mask
return torch.matmul(att.softmax(dim=-1), v)""",
    f"mask = torch.where(torch.rand(2, 1, 35, 35) > 0.5, 0.0, -1e9)\nreturn [{_qkv(2, 3, 35, 35, 72)}, mask]",
    f"mask = torch.where(torch.rand(1, 1, 3, 3) > 0.5, 0.0, -1e9)\nreturn [[{_qkv(1, 2, 3, 3, 72)}, mask]]")

# torch.where(keep, scores, -inf) with a keep mask [L, S] input and a finite masked_fill of ~keep
WHERE_AND_FINITE = _spec(
    "torch.where(keep, scores, -inf) and masked_fill(~keep, -1e4) in one forward.", "q, k, v, keep",
    """s = q @ k.transpose(-2, -1) / 8.0
a = torch.softmax(torch.where(keep, s, float("-inf")), dim=-1) @ v
t = (q @ k.transpose(-2, -1)).masked_fill(~keep, -1e4)
return a, torch.softmax(t, dim=-1) @ v""",
    f"keep = torch.rand(27, 31) > 0.5\nkeep[5] = False\nreturn [{_qkv(2, 2, 27, 31, 40)}, keep]",
    f"keep = torch.rand(4, 80) > 0.5\nreturn [[{_qkv(1, 1, 4, 80, 40)}, keep]]")

# fp16 scores masked with where(keep, scores, -inf), a dropout of p = 0 between the softmax
# and @ v (the identity: part of the chain), head dim 72, S != L
WHERE_HALF_DROPOUT0 = _spec(
    "Half-precision where(keep, scores, -inf) with a p = 0 dropout on the probabilities.", "q, k, v, keep",
    """s = torch.matmul(q, k.transpose(-2, -1)) * self.scale
p = self.drop(torch.softmax(torch.where(keep, s, float("-inf")), dim=-1))
return torch.matmul(p, v)""",
    f"keep = torch.rand(2, 1, 18, 43) > 0.3\nreturn [{_qkv(2, 3, 18, 43, 72, 'torch.float16')}, keep]",
    f"keep = torch.rand(1, 1, 70, 6) > 0.3\nreturn [[{_qkv(1, 2, 70, 6, 72, 'torch.float16')}, keep]]",
    init="self.scale = 72 ** -0.5\nself.drop = nn.Dropout(0.0)", tolerance='{"atol": 2e-2, "rtol": 2e-2}')

# the mask before the scale: masked_fill(q @ k^T, ~keep, -1e4) / sqrt(d) (the fill is scaled
# too) and (q @ k^T + bias) * 0.2 (so is the bias)
MASK_BEFORE_SCALE = _spec(
    "Masks applied to the raw product, then scaled: the kernel keeps torch's order.", "q, k, v, keep, bias",
    """a = (q @ k.transpose(-2, -1)).masked_fill(~keep, -1e4) / math.sqrt(q.size(-1))
b = (q @ k.transpose(-2, -1) + bias) * 0.2
return torch.softmax(a, dim=-1) @ v, torch.softmax(b, dim=-1) @ v""",
    f"keep = torch.rand(2, 1, 1, 26) > 0.5\nkeep[0] = False\n"
    f"return [{_qkv(2, 2, 15, 26, 40)}, keep, torch.randn(2, 2, 15, 26) * 4]",
    f"keep = torch.rand(1, 1, 1, 3) > 0.5\nreturn [[{_qkv(1, 1, 66, 3, 40)}, keep, torch.randn(1, 1, 66, 3)]]")

# Hugging Face's eager GPT-2 attention: torch.finfo(dtype).min as the fill and a 0-d tensor
# divisor; fx cannot trace finfo of a traced dtype, so the dispatcher-level trace takes the
# forward (matmuls as bmm of reshapes, the fill and divisor as 0-d constant tensors)
HF_EAGER = _spec(
    "Hugging Face style eager attention: where(causal slice, w, finfo.min) after a 0-d divisor.", "q, k, v, pad",
    """w = torch.matmul(q, k.transpose(-1, -2))
w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
ql, kl = q.size(-2), k.size(-2)
w = torch.where(self.bias[:, :, kl - ql:kl, :kl], w, torch.finfo(w.dtype).min)
a = torch.matmul(nn.functional.softmax(w, dim=-1), v)
u = (q @ k.transpose(-1, -2)).masked_fill(pad[:, None, None, :], torch.finfo(q.dtype).min)
return a, torch.matmul(u.softmax(-1), v)""",
    f"pad = torch.rand(2, 17) > 0.6\npad[1] = True\nreturn [{_qkv(2, 3, 13, 17, 40)}, pad]",
    # the dispatcher-level graph is fixed to the example's shapes: the extra set keeps them
    f"pad = torch.rand(2, 17) > 0.3\nreturn [[{_qkv(2, 3, 13, 17, 40)}, pad]]",
    init='n = 24\nself.register_buffer("bias", torch.tril(torch.ones(n, n, dtype=torch.bool)).view(1, 1, n, n))')

# a GPT block whose buffer is a sliding window, not the causal triangle: read from the buffer
WINDOW_BUFFER = _spec(
    "Causal sliding-window attention: a banded buffer sliced to [:, :, :T, :T].", "x",
    """B, T, C = x.size()
q, k, v = self.qkv(x).split(C, dim=2)
q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
y = F.softmax(att, dim=-1) @ v
return y.transpose(1, 2).contiguous().view(B, T, C)""",
    "return [torch.randn(2, 37, 80)]", "return [[torch.randn(1, 9, 80)]]",
    init="""self.n_head = n_head
self.qkv = nn.Linear(n_embd, 3 * n_embd)
ones = torch.ones(n, n)
self.register_buffer("bias", (torch.tril(ones) - torch.tril(ones, -5)).view(1, 1, n, n))""",
    init_args=", n_embd, n_head, n", init_inputs="80, 2, 48")

MASKED = {"sdpa_padding": SDPA_PADDING, "sdpa_additive": SDPA_ADDITIVE, "sdpa_full_half": SDPA_FULL_HALF,
          "masked_fill_eq0": MASKED_FILL_EQ0, "additive_plain": ADDITIVE_PLAIN, "where_and_finite": WHERE_AND_FINITE,
          "where_half_dropout0": WHERE_HALF_DROPOUT0, "mask_before_scale": MASK_BEFORE_SCALE,
          "hf_eager": HF_EAGER}


def _propose(synth: OfflineSynthesizer, src: str, name: str, genome: dict[str, str] | None = None) -> Any:
    if genome is None:
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        return prop.source, prop.fallback_nodes
    src_out, _full, fb = synth.lower(synth._capture(src, name, genome), genome)
    return src_out, fb


def _kernels(source: str) -> list[str]:
    return re.findall(r"@triton\.jit\ndef (\w+)\(", source)


@pytest.fixture(scope="module")
def lowered(synth: OfflineSynthesizer) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {name: _propose(synth, src, name) for name, src in {**MASKED, "window_buffer": WINDOW_BUFFER}.items()}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_masked_attention_is_one_flash_kernel(name: str, lowered: dict[str, Any]) -> None:
    source, fallback = lowered[name]
    assert fallback == ()
    chains = 2 if name in ("where_and_finite", "mask_before_scale", "hf_eager") else 1
    # nothing but the flash kernels: no score matmul, no softmax row kernel, no mask kernel
    kernels = _kernels(source)
    assert len(kernels) == chains and all(k.startswith("flash_attention_") for k in kernels), kernels
    assert source.count("mv = tl.load(m_row") == chains  # the mask is read in the key loop
    assert "tl.store" in source and source.count("tl.store(") == chains  # only the output is stored


def test_masked_candidates_are_correct(lowered: dict[str, Any]) -> None:
    jobs = [{"id": name, "spec_source": src, "candidate_source": lowered[name][0], "seeds": [1, 2]}
            for name, src in {**MASKED, "window_buffer": WINDOW_BUFFER}.items()]
    for result in run_in_subprocess(jobs):
        assert result["ok"], (result["id"], result["error"][-800:], result["trials"])
        assert [t["kind"] for t in result["trials"]] == ["seed", "seed", "extra"]


def test_fully_masked_rows_follow_torch() -> None:
    """torch 2.13: SDPA gives zeros for a row with every key masked (its safe softmax, for
    boolean and all -inf float masks alike); softmax over an all -inf row gives NaN."""
    q, k, v = torch.randn(1, 1, 3, 8), torch.randn(1, 1, 5, 8), torch.randn(1, 1, 5, 8)
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[1] = False
    assert torch.equal(F.scaled_dot_product_attention(q, k, v, attn_mask=keep)[0, 0, 1], torch.zeros(8))
    bias = torch.zeros(3, 5).masked_fill(~keep, float("-inf"))
    assert torch.equal(F.scaled_dot_product_attention(q, k, v, attn_mask=bias)[0, 0, 1], torch.zeros(8))
    plain = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~keep, float("-inf")), -1) @ v
    assert torch.isnan(plain[0, 0, 1]).all() and not torch.isnan(plain[0, 0, 0]).any()


def test_fully_masked_rows_in_the_kernels(lowered: dict[str, Any]) -> None:
    # SDPA kernels zero an empty row; the softmax chains keep 0 / 0 (NaN); the candidates
    # of both (with such rows in their inputs) pass the correctness run above
    for name in ("sdpa_padding", "sdpa_additive", "sdpa_full_half"):
        assert "out = tl.where(l_i[:, None] == 0.0, 0.0, acc / l_i[:, None])" in lowered[name][0]
    for name in ("masked_fill_eq0", "additive_plain", "where_and_finite", "where_half_dropout0", "mask_before_scale",
                 "hf_eager"):
        assert "out = acc / l_i[:, None]\n" in lowered[name][0]
        assert "l_i[:, None] == 0.0" not in lowered[name][0]


def test_mask_broadcast_is_read_through_strides(lowered: dict[str, Any]) -> None:
    source = lowered["sdpa_padding"][0]
    # the mask view: expanded (stride 0) and reshaped, never materialised; the kernel picks
    # (batch, head) from the folded program id
    assert "m.expand(*lead, q.shape[-2], k.shape[-2]).reshape(-1, lead[-1] if lead else 1" in source
    assert "m_row = m_ptr + (bid // HEADS) * m_sb + (bid % HEADS) * m_sh" in source
    assert "s = tl.where(mv == 0, float(\"-inf\"), s)" in source  # keep-mask: dropped where False
    assert "mv != 0" not in source
    assert "s = s + mv.to(tl.float32)" in lowered["sdpa_additive"][0]
    eq0 = lowered["masked_fill_eq0"][0]
    assert "s = tl.where(mv == 0, float(\"-inf\"), s)" in eq0  # mask == 0 applied in the kernel
    assert "where_and_finite" in lowered and "s = tl.where(mv == 0, -10000.0, s)" in lowered["where_and_finite"][0]


def test_mask_before_the_scale_keeps_torchs_order(lowered: dict[str, Any]) -> None:
    source = lowered["mask_before_scale"][0]
    # the product is masked first, then scaled (a finite fill and an additive mask scaled too)
    assert source.count('s = tl.dot(q, k, input_precision="tf32x3")\n') == 2
    assert source.count("        s = s * sm_scale\n") == 2
    assert "s = tl.where(mv == 0, -10000.0, s)\n        s = s * sm_scale" in source
    assert "s = s + mv.to(tl.float32)\n        s = s * sm_scale" in source
    assert "1.0 / scale" in source  # divided by sqrt(d), computed by the forward


def test_dispatcher_level_chains(synth: OfflineSynthesizer, lowered: dict[str, Any]) -> None:
    assert synth._capture(HF_EAGER, "hf_eager").tracer == "aten"
    source = lowered["hf_eager"][0]
    # the fill and the divisor were 0-d tensors: constants of the kernel now, nothing launched for them
    assert source.count("-3.4028234663852886e+38, s)") == 2 and "torch.full(" not in source
    assert "sizes = (lq, lk, d, dv, views[3].shape[1], 0.15811388300841897)" in source  # 1 / sqrt(40)
    assert "bmm" not in source.split("class ModelNew")[1]


def test_window_buffer_is_read_not_taken_for_causal(lowered: dict[str, Any]) -> None:
    source, fallback = lowered["window_buffer"]
    assert fallback == ()
    flash = [k for k in _kernels(source) if k.startswith("flash_")]
    assert len(flash) == 1 and "m_ptr" in source and "hi = LK" in source
    assert "_buffers['bias']" in source  # the buffer slice itself, compared with 0 in the kernel
    assert not any("softmax" in k or "masked_fill" in k for k in _kernels(source))


# registered triangles: a float tril sliced [:, :, :T, :T] (T < n and T == n) compared with
# 0, one used whole (fx folds `mask == 0` into a constant), a boolean tril sliced [:T, :T]
# and inverted (its scores an einsum)
GPT_CAUSAL = ["model_gpt_causal_block", "gpt_block_tril", "gpt_attn_full_mask", "causal_bool_buffer_slice"]


@pytest.mark.parametrize("name", GPT_CAUSAL)
def test_gpt_causal_buffer_is_causal(name: str, synth: OfflineSynthesizer) -> None:
    src = (STYLES_DIR / f"{name}.py").read_text()
    source, fallback = _propose(synth, src, name)
    assert fallback == ()
    flash = [k for k in _kernels(source) if k.startswith("flash_")]
    assert len(flash) == 1
    assert "hi = tl.minimum(LK, (pid_m + 1) * BLOCK_M)" in source and "m_ptr" not in source
    assert not any("softmax" in k or "masked_fill" in k for k in _kernels(source))
    assert "torch.tensor(" not in source  # the folded constant mask is not rebuilt either


# the example operators of each idiom (their seeds are checked with every example's)
EXAMPLE_MODES = {"sdpa_padding_mask": "mv == 0", "attention_additive_mask": "s = s + mv.to(tl.float32)",
                 "attention_padding_fill": "s = tl.where(mv == 0, -1000000000.0, s)"}


@pytest.mark.parametrize("name", sorted(EXAMPLE_MODES))
def test_mask_examples_are_one_flash_kernel(name: str, synth: OfflineSynthesizer) -> None:
    source, fallback = _propose(synth, example_source(name), name)
    assert fallback == ()
    flash = [k for k in _kernels(source) if k.startswith("flash_")]
    assert len(flash) == 1 and EXAMPLE_MODES[name] in source
    assert not any("softmax" in k or "masked_fill" in k or k.startswith("matmul_matmul") for k in _kernels(source))


def _buffer_graph(buffer: torch.Tensor) -> tuple[torch.fx.GraphModule, torch.fx.Node]:
    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("bias", buffer)

    g = torch.fx.Graph()
    attr = g.get_attr("bias")
    t = g.placeholder("t")
    sl = g.call_function(__import__("operator").getitem, (attr, (slice(None), slice(None), slice(None, t),
                                                                 slice(None, t))))
    g.output(sl)
    gm = torch.fx.GraphModule(Holder(), g)
    sl.meta["tensor_meta"] = type("M", (), {"shape": torch.Size([1, 1, 6, 6]), "dtype": buffer.dtype})()
    return gm, sl


@pytest.mark.parametrize("buffer, mode, causal", [
    (torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9), "eq0", True),
    (torch.tril(torch.ones(9, 9, dtype=torch.bool)).view(1, 1, 9, 9), "keep", True),
    (torch.ones(9, 9, dtype=torch.bool).triu(1).view(1, 1, 9, 9), "drop", True),
    (torch.zeros(9, 9).masked_fill(torch.ones(9, 9, dtype=torch.bool).triu(1), float("-inf")).view(1, 1, 9, 9),
     "add", True),
    (torch.tril(torch.ones(9, 9), -1).view(1, 1, 9, 9), "eq0", False),  # strictly lower: not causal
    (torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9) * 2 - 1, "eq0", False),  # no zero at all
    (torch.triu(torch.ones(9, 9)).view(1, 1, 9, 9), "eq0", False),  # upper: anti-causal
])
def test_causal_proof(buffer: torch.Tensor, mode: str, causal: bool) -> None:
    gm, sl = _buffer_graph(buffer)
    got = prove_causal(AttentionMask(sl, mode), gm, (6, 6))
    assert got.causal is causal and (got.tensor is None) is causal
    # a finite fill keeps the dropped keys in the softmax: never causal
    assert not prove_causal(AttentionMask(sl, mode, -1e4), gm, (6, 6)).causal


def test_causal_proof_needs_the_value() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9)
    gm, sl = _buffer_graph(fake)
    assert not prove_causal(AttentionMask(sl, "eq0"), gm, (6, 6)).causal  # fake capture: read the buffer


def test_unfused_choice_and_masked_knobs(synth: OfflineSynthesizer) -> None:
    space = dict(synth.space(MASKED_FILL_EQ0, "masked_fill_eq0"))
    assert space["attention"] == ["flash", "unfused"]
    assert {"g0.BLOCK_M", "g0.BLOCK_N", "g0.num_warps", "g0.num_stages", "g0.precision"} <= set(space)
    unfused, fb = _propose(synth, MASKED_FILL_EQ0, "masked_fill_eq0", {"attention": "unfused"})
    assert fb == () and not any(k.startswith("flash_") for k in _kernels(unfused))
    small, fb2 = _propose(synth, MASKED_FILL_EQ0, "masked_fill_eq0", {"g0.BLOCK_M": "16", "g0.BLOCK_N": "16",
                                                                     "g0.num_stages": "1", "g0.precision": "ieee"})
    assert fb2 == () and "BLOCK_M=16, BLOCK_N=16" in small
    padding, _ = _propose(synth, SDPA_PADDING, "sdpa_padding", {"g0.BLOCK_M": "32", "g0.BLOCK_N": "16"})
    jobs = [{"id": "unfused", "spec_source": MASKED_FILL_EQ0, "candidate_source": unfused, "seeds": [1]},
            {"id": "small_blocks", "spec_source": MASKED_FILL_EQ0, "candidate_source": small, "seeds": [1]},
            {"id": "padding_blocks", "spec_source": SDPA_PADDING, "candidate_source": padding, "seeds": [1]}]
    for result in run_in_subprocess(jobs):
        assert result["ok"], (result["id"], result["error"][-800:], result["trials"])


DROPOUT = _spec(
    "SDPA with a mask and dropout: random, stays a library call.", "q, k, v, keep",
    "return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=0.1)",
    f"return [{_qkv(1, 2, 8, 8, 16)}, torch.rand(8, 8) > 0.5]",
    f"return [[{_qkv(1, 2, 8, 8, 16)}, torch.ones(8, 8) > 0]]")


def test_dropout_stays_a_library_call(synth: OfflineSynthesizer) -> None:
    source, fallback = _propose(synth, DROPOUT, "sdpa_dropout")
    assert fallback == ("scaled_dot_product_attention",)
    assert not any(k.startswith("flash_") for k in _kernels(source))


# ---- the GPT buffer at real size, captured on fake tensors ---------------------------------

# the style example's buffer line, and buffers in its place that are not the causal triangle:
# a random boolean keep-mask (drawn at construction: the rebuilt model draws the same one) and
# a triangle shifted one key past the diagonal
GPT_TRIL = ('self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, 1, block_size, '
            'block_size))')
GPT_NOT_CAUSAL = {
    "random_bool": 'self.register_buffer("bias", (torch.rand(block_size, block_size) > 0.3).view(1, 1, block_size, '
                   'block_size))',
    "shifted_tril": 'self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size), 1).view(1, 1, '
                    'block_size, block_size))',
}


def _gpt(buffer: str, tokens: tuple[int, int] = (40, 1024)) -> str:
    """The GPT-2 block style example with ``buffer`` as its mask, 128 wide, 2 heads of 64 and a
    1024-token triangle, on ``tokens`` (batch, length) of input: 40 x 1024 (20 MiB of input, 4.8
    MiB of parameters and buffers) is captured on fake tensors; narrow, so that the interpreter
    checks its candidates in seconds."""
    src = (STYLES_DIR / "model_gpt_causal_block.py").read_text()
    assert GPT_TRIL in src
    src = src.replace(GPT_TRIL, buffer)
    src = src.replace("N_EMBD, N_HEAD, BLOCK = 48, 4, 64", "N_EMBD, N_HEAD, BLOCK = 128, 2, 1024")
    src = src.replace("torch.randn(2, 37, N_EMBD)", f"torch.randn({tokens[0]}, {tokens[1]}, N_EMBD)")
    assert "128, 2, 1024" in src and f"{tokens[0]}, {tokens[1]}, N_EMBD" in src
    return src


@pytest.fixture(scope="module")
def gpt_large(synth: OfflineSynthesizer) -> dict[str, tuple[Any, str]]:
    out = {}
    for name, buffer in {"tril": GPT_TRIL, **GPT_NOT_CAUSAL}.items():
        spec = synth.captured(_gpt(buffer), f"gpt_{name}")
        out[name] = spec, synth.lower(spec, {})[0]
    return out


def test_gpt_causal_buffer_at_real_size_is_causal(gpt_large: dict[str, tuple[Any, str]]) -> None:
    """Captured on fake tensors (no forward on real data), the triangle's value comes from the
    model built for real: the mask is not read and the key loop stops at the diagonal."""
    spec, source = gpt_large["tril"]
    assert spec.fake_mode is not None and spec.tracer == "symbolic"
    assert sum(x.numel() * x.element_size() for x in spec.inputs) > LARGE_BYTES
    assert all(isinstance(t, FakeTensor) for t in (*spec.inputs, *spec.model.buffers(), *spec.model.parameters()))
    flash = [k for k in _kernels(source) if k.startswith("flash_")]
    assert len(flash) == 1
    assert "hi = tl.minimum(LK, (pid_m + 1) * BLOCK_M)" in source and "m_ptr" not in source
    assert "_buffers['bias']" not in source


@pytest.mark.parametrize("name", sorted(GPT_NOT_CAUSAL))
def test_gpt_buffer_at_real_size_not_tril_is_read(name: str, gpt_large: dict[str, tuple[Any, str]]) -> None:
    spec, source = gpt_large[name]
    assert spec.fake_mode is not None
    flash = [k for k in _kernels(source) if k.startswith("flash_")]
    assert len(flash) == 1 and "m_ptr" in source and "hi = LK" in source
    assert "_buffers['bias']" in source  # the buffer slice, compared with 0 in the kernel


def test_real_state_only_for_small_models() -> None:
    """A fake capture whose parameters and buffers exceed REAL_STATE_BYTES is not rebuilt for
    real: its tril is not proven causal (read, as without values), never assumed."""
    with FakeTensorMode():
        fake = torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9)
    built: list[int] = []

    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("bias", torch.tril(torch.ones(9, 9)).view(1, 1, 9, 9))

    def build() -> torch.nn.Module:
        built.append(1)
        return Holder()

    gm, sl = _buffer_graph(fake)
    real_state.attach(gm, build, real_state.REAL_STATE_BYTES + 1, "big")
    assert not prove_causal(AttentionMask(sl, "eq0"), gm, (6, 6)).causal and not built
    gm, sl = _buffer_graph(fake)
    real_state.attach(gm, build, real_state.REAL_STATE_BYTES, "small")
    with FakeTensorMode():  # asked from inside the capture's mode, the model is still built for real
        assert prove_causal(AttentionMask(sl, "eq0"), gm, (6, 6)).causal and built == [1]
    prove_causal(AttentionMask(sl, "eq0"), gm, (6, 6))
    assert built == [1]  # built once per capture
    # a real buffer of another shape than the capture saw is no answer
    with FakeTensorMode():
        other = torch.ones(1, 1, 8, 8)
    gm, sl = _buffer_graph(other)
    real_state.attach(gm, build, 0, "other")
    assert not prove_causal(AttentionMask(sl, "eq0"), gm, (6, 6)).causal


def test_gpt_buffers_candidates_are_correct(gpt_large: dict[str, tuple[Any, str]]) -> None:
    """The candidates lowered from the real-size captures (symbolic graphs: the sequence length
    is read at run time) match the same modules on 1 x 40 tokens in the interpreter."""
    jobs = [{"id": name, "spec_source": _gpt(buffer, (1, 40)), "candidate_source": gpt_large[name][1],
             "seeds": [1]} for name, buffer in {"tril": GPT_TRIL, **GPT_NOT_CAUSAL}.items()]
    for result in run_in_subprocess(jobs):
        assert result["ok"], (result["id"], result["error"][-800:], result["trials"])
