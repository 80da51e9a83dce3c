"""Data movement, indexing, lookups, segment reductions, scatters and integer elementwise
ops (families ``index``, ``scatter``, ``integer``): each spelling is lowered to Triton with
nothing left to the library, and every candidate matches its reference in the interpreter
on odd shapes (1, 7, 33, 1000 elements along some dim) and dtypes (fp32, fp16, int32,
int64, bool), on two fresh seeds and on an extra shape set where the spec has one."""

from __future__ import annotations

from typing import Any

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import example_source


def _spec(body: str, inputs: list[str], extra: list[str] | None = None, init: str = "") -> str:
    names = ["x", "y", "z", "w"][:len(inputs)]
    lines = ["import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", "",
             "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()"]
    lines += [f"        {init}"] if init else []
    lines += ["", f"    def forward(self, {', '.join(names)}):", f"        return {body}", "", "",
              "def get_inputs():", f"    return [{', '.join(inputs)}]", "", "",
              "def get_init_inputs():", "    return []", ""]
    if extra:
        lines += ["", "def get_extra_inputs():", f"    return [[{', '.join(extra)}]]", ""]
    return "\n".join(lines)


R = "torch.randn"
I64 = "torch.randint"
# name -> (forward body, inputs, extra input set or None, the kernel-name prefix it must launch)
CASES: dict[str, tuple[str, list[str], list[str] | None, str]] = {
    "flip": ("torch.flip(x, [0, 2]) * 2", [f"{R}(3, 5, 7)"], [f"{R}(1, 33, 2)"], "index_flip"),
    "flip_method_int": ("x.flip(-1)", [f"{I64}(-9, 9, (7, 1000))"], None, "index_flip"),
    "fliplr_bool": ("torch.fliplr(x > 0)", [f"{R}(33, 7)"], None, "index_flip"),
    "roll_dims": ("torch.roll(x, shifts=(2, -1, 40), dims=(1, 0, 1))", [f"{R}(4, 9)"], [f"{R}(1, 7)"],
                  "index_roll"),
    "roll_flat": ("x.roll(5)", [f"{R}(4, 9)"], [f"{R}(1, 33)"], "index_roll"),
    "cat_three": ("torch.cat([x, y, x * 2], dim=1)", [f"{R}(3, 4)", f"{R}(3, 7)"], [f"{R}(1, 1)", f"{R}(1, 33)"],
                  "index_cat"),
    "cat_int_dim0": ("torch.cat((x, y), 0)", [f"{I64}(0, 100, (3, 4))", f"{I64}(0, 100, (1, 4))"], None,
                     "index_cat"),
    "cat_half_strided": ("torch.cat([x.t(), y], dim=-1)", [f"{R}(5, 7).half()", f"{R}(7, 2).half()"], None,
                         "index_cat"),
    "hstack": ("torch.hstack([x, y])", [f"{R}(33)", f"{R}(7)"], None, "index_cat"),
    "stack_mid": ("torch.stack([x, y, x], dim=1)", [f"{R}(3, 4)", f"{R}(3, 4)"], [f"{R}(1, 1000)", f"{R}(1, 1000)"],
                  "index_stack"),
    "tril_triu": ("torch.tril(x, 1) + x.triu(-2)", [f"{R}(2, 5, 7)"], [f"{R}(1, 33, 1)"], "index_tril"),
    "triu_int": ("torch.triu(x)", [f"{I64}(0, 9, (7, 7), dtype=torch.int32)"], None, "index_triu"),
    "repeat": ("x.repeat(2, 1, 3)", [f"{R}(5, 3)"], [f"{R}(1, 7)"], "index_repeat"),
    "tile": ("torch.tile(x, (2,))", [f"{R}(5, 3)"], None, "index_repeat"),
    "pad_constant": ("F.pad(x, (1, 2, 0, 3), value=1.5)", [f"{R}(2, 3, 4)"], [f"{R}(1, 1, 33)"], "index_pad"),
    "pad_crop": ("F.pad(x, (-1, 2))", [f"{R}(2, 7)"], None, "index_pad"),
    "pad_reflect": ("F.pad(x, (2, 1, 1, 2), mode='reflect')", [f"{R}(2, 3, 5, 6)"], None, "index_pad"),
    "pad_replicate": ("F.pad(x, (2, 1), mode='replicate')", [f"{R}(2, 3, 1)"], None, "index_pad"),
    "pad_circular": ("F.pad(x, (2, 1, 1, 1), mode='circular')", [f"{R}(2, 3, 5, 6)"], None, "index_pad"),
    "pad_module": ("self.pad(x)", [f"{R}(2, 3, 5, 6)"], None, "index_pad"),
    "index_select": ("torch.index_select(x, 1, y)", [f"{R}(4, 6)", "torch.tensor([5, 0, 0, 3])"], None,
                     "index_index_select"),
    "gather_dim0": ("torch.gather(x, 0, y)", [f"{R}(4, 6)", f"{I64}(0, 4, (3, 5))"], None, "index_gather"),
    "take_along_dim": ("torch.take_along_dim(x, y, dim=1)", [f"{R}(4, 33)", f"{I64}(0, 33, (4, 7))"], None,
                       "index_gather"),
    "embedding_relu": ("F.embedding(x, y).relu()", [f"{I64}(0, 10, (3, 5))", f"{R}(10, 7)"], None,
                       "index_embedding"),
    "embedding_module": ("self.emb(x)", [f"{I64}(0, 33, (1000,))"], None, "index_embedding"),
    "advanced_index": ("x[:, y, z] * 1.0", [f"{R}(3, 5, 6)", "torch.tensor([0, 4, -1, 2])",
                                            "torch.tensor([5, 0, 1, 1])"], None, "index_take"),
    "advanced_index_rows": ("x[y]", [f"{R}(7, 5)", f"{I64}(0, 7, (2, 3))"], None, "index_take"),
    "pixel_shuffle": ("F.pixel_shuffle(x, 2)", [f"{R}(2, 8, 3, 5)"], None, "index_pixel_shuffle"),
    "pixel_unshuffle": ("F.pixel_unshuffle(x, 2)", [f"{R}(2, 3, 4, 6)"], None, "index_pixel_unshuffle"),
    "repeat_interleave": ("torch.repeat_interleave(x, 3, dim=1)", [f"{R}(2, 5)"], None, "index_repeat_interleave"),
    "repeat_interleave_flat": ("x.repeat_interleave(2)", [f"{R}(2, 5)"], None, "index_repeat_interleave"),
    "bucketize": ("torch.bucketize(x, y)", [f"{R}(7, 33)", "torch.linspace(-2, 2, 17)"], None, "index_search"),
    "bucketize_right_ties": ("torch.bucketize(x, y, right=True)",
                             [f"{I64}(0, 10, (1000,)).float()", "torch.arange(0, 10, 2).float()"], None,
                             "index_search"),
    "bucketize_int32_out": ("torch.bucketize(x, y, out_int32=True)", [f"{I64}(0, 50, (33,))", "torch.arange(1, 50, 3)"],
                            None, "index_search"),
    "searchsorted_rows": ("torch.searchsorted(y, x, side='right')",
                          [f"{R}(3, 20)", "torch.sort(torch.randn(3, 1), dim=-1).values"], None, "index_search"),
    "embedding_bag_sum": ("F.embedding_bag(x, y, z, mode='sum')",
                          [f"{I64}(0, 10, (20,))", f"{R}(10, 7)", "torch.tensor([0, 3, 3, 11])"], None,
                          "index_embedding_bag"),
    "embedding_bag_mean_pad": ("F.embedding_bag(x, y, z, mode='mean', padding_idx=2)",
                               [f"{I64}(0, 4, (20,))", f"{R}(10, 33)", "torch.tensor([0, 3, 3, 11])"], None,
                               "index_embedding_bag"),
    "embedding_bag_max_fixed": ("F.embedding_bag(x, y, mode='max')", [f"{I64}(0, 10, (4, 5))", f"{R}(10, 7)"], None,
                                "index_embedding_bag"),
    "embedding_bag_fixed_view": ("F.embedding_bag(x.t(), y, mode='sum', per_sample_weights=z)",
                                 [f"{I64}(0, 10, (5, 4))", f"{R}(10, 7)", f"{R}(4, 5)"], None,
                                 "index_embedding_bag"),
    "embedding_bag_weighted_last": (
        "F.embedding_bag(x, y, z, mode='sum', per_sample_weights=w, include_last_offset=True)",
        [f"{I64}(0, 10, (20,))", f"{R}(10, 7)", "torch.tensor([0, 3, 3, 11, 20])", "torch.rand(20)"], None,
        "index_embedding_bag"),
    "segment_sum_lengths": ("torch.segment_reduce(x, 'sum', lengths=y)", [f"{R}(10, 3)", "torch.tensor([2, 0, 5, 3])"],
                            None, "index_segment_reduce"),
    "segment_mean_empty": ("torch.segment_reduce(x, 'mean', lengths=y)", [f"{R}(10, 3)", "torch.tensor([2, 8, 0])"],
                           None, "index_segment_reduce"),
    "segment_max_offsets": ("torch.segment_reduce(x, 'max', offsets=y)",
                            [f"{R}(10, 2, 3)", "torch.tensor([0, 2, 7, 10])"], None, "index_segment_reduce"),
    "index_fill_neg": ("x.index_fill(-1, y, -2.5)", [f"{R}(5, 7)", "torch.tensor([0, -1, 3])"], None,
                       "index_index_fill"),
    "rot90": ("torch.rot90(x, 1, [0, 2]) + torch.rot90(x, 2, [1, 2]).sum() + torch.rot90(x, -1, [0, 2])",
              [f"{R}(3, 4, 5)"], None, "index_rot90"),
    "vstack_vectors": ("torch.vstack([x, y])", [f"{R}(33)", f"{R}(33)"], None, "index_stack"),
    "column_stack": ("torch.column_stack([x, y])", [f"{R}(7, 2)", f"{R}(7, 1)"], None, "index_cat"),
    "take_flat": ("torch.take(x, y)", [f"{R}(3, 5)", "torch.tensor([[0, -1], [14, 3]])"], None, "index_take_flat"),
    "diag_vector": ("torch.diag(x, -2)", [f"{R}(7)"], None, "index_diag_embed"),
    "diag_embed": ("torch.diag_embed(x, 1, 0, 2)", [f"{R}(3, 4)"], None, "index_diag_embed"),
    "diagflat": ("torch.diagflat(x, 1)", [f"{R}(2, 3)"], None, "index_diag_embed"),
    "copies_of_views": ("torch.diagonal(x, 1, 0, 2) + torch.select(x, 1, 2).sum() + x.unfold(2, 2, 1).sum() "
                        "+ torch.permute_copy(x, (2, 0, 1)).sum() + torch.ravel(x.transpose(0, 1)).sum()",
                        [f"{R}(3, 4, 5)"], None, "index_copy"),
    "segment_initial": ("torch.segment_reduce(x, 'mean', lengths=y, initial=1.0)",
                        [f"{R}(6, 2)", "torch.tensor([2, 0, 4])"], None, "index_segment_reduce"),
    "interp_nearest": ("F.interpolate(x, size=(7,), mode='nearest')", [f"{R}(2, 3, 4)"], [f"{R}(1, 1, 33)"],
                       "index_interpolate"),
    "interp_nearest_exact_scale": ("F.interpolate(x, scale_factor=1.7, mode='nearest-exact')",
                                   [f"{R}(2, 3, 5, 4)"], None, "index_interpolate"),
    "interp_linear": ("F.interpolate(x, size=9, mode='linear')", [f"{R}(2, 3, 4)"], None, "index_interpolate"),
    "interp_bilinear_align": ("F.interpolate(x, size=(3, 7), mode='bilinear', align_corners=True)",
                              [f"{R}(2, 3, 4, 5)"], [f"{R}(1, 1, 33, 1)"], "index_interpolate"),
    "interp_bilinear_scale": ("F.interpolate(x, scale_factor=2, mode='bilinear')", [f"{R}(1, 2, 5, 3)"], None,
                              "index_interpolate"),
    "interp_trilinear": ("F.interpolate(x, size=(3, 5, 2), mode='trilinear')", [f"{R}(1, 2, 4, 3, 5)"], None,
                         "index_interpolate"),
    "interp_bicubic": ("F.interpolate(x, size=(5, 9), mode='bicubic')", [f"{R}(2, 1, 4, 6)"], None,
                       "index_interpolate"),
    "interp_bicubic_align": ("F.interpolate(x, scale_factor=(1.5, 0.5), mode='bicubic', align_corners=True)",
                             [f"{R}(1, 2, 4, 8)"], None, "index_interpolate"),
    "upsample_bilinear": ("F.upsample_bilinear(x, size=(3, 3))", [f"{R}(2, 3, 4, 4)"], None, "index_interpolate"),
    "index_add": ("torch.index_add(x, 0, y, z, alpha=2)", [f"{R}(5, 3)", "torch.tensor([0, 4, 0, 2])", f"{R}(4, 3)"],
                  None, "scatter_index_add"),
    "index_add_int": ("x.index_add(1, y, z)", [f"{I64}(0, 9, (5, 3))", "torch.tensor([0, 2, 0, 0, 1])",
                                               f"{I64}(0, 9, (5, 5))"], None, "scatter_index_add"),
    "index_copy": ("x.index_copy(0, y, z)", [f"{R}(5, 3)", "torch.tensor([4, 1])", f"{R}(2, 3)"], None,
                   "scatter_index_copy"),
    "scatter_add": ("torch.scatter_add(x, 1, y, z)", [f"{R}(3, 6)", f"{I64}(0, 6, (3, 4))", f"{R}(3, 4)"], None,
                    "scatter_scatter_add"),
    "scatter_value": ("x.scatter(0, y, 3.5)", [f"{R}(4, 6)", "torch.tensor([[1, 2, 3], [0, 1, 3]])"], None,
                      "scatter_scatter"),
    "hash_int64": ("torch.remainder((x * 2654435761) ^ (x >> 15), 1000) + (y & 7)",
                   [f"{I64}(-2**40, 2**40, (33, 7))", f"{I64}(0, 100, (7,))"], None, "int_remainder"),
    "hash_int32": ("((x * 2654435761) ^ (x >> 3)) % 97 - x // 5 + torch.div(x, 7, rounding_mode='trunc')",
                   [f"{I64}(-2**30, 2**30, (1000,), dtype=torch.int32)"], None, "int_floor_divide"),
    "int_graph_scalar": ("torch.remainder(x * 3, y.shape[0]) + (x >> 2)",
                         [f"{I64}(-2**40, 2**40, (7, 33))", f"{R}(13, 2)"], None, "int_remainder"),
    "int_bitwise_misc": ("torch.bitwise_not(x) | (x << 2) - torch.fmod(x, 5) + torch.maximum(x, -x).abs()",
                         [f"{I64}(-99, 99, (7, 1), dtype=torch.int32)"], None, "int_not"),
}
INITS = {"pad_module": "self.pad = nn.ReflectionPad2d((1, 2, 0, 1))",
         "embedding_module": "self.emb = nn.Embedding(33, 7)"}


def lower_and_check(synth: OfflineSynthesizer, specs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Seed proposal of every spec (name -> source), all checked in one interpreter
    subprocess; each result carries its ``proposal``."""
    jobs = []
    props = {}
    for name, src in specs.items():
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        props[name] = prop
        jobs.append({"id": name, "spec_source": src, "candidate_source": prop.source, "seeds": [1, 2]})
    results = {r["id"]: r for r in run_in_subprocess(jobs)}
    for name, prop in props.items():
        results[name]["proposal"] = prop
    return results


@pytest.fixture(scope="module")
def lowered(synth: OfflineSynthesizer) -> dict[str, dict[str, Any]]:
    return lower_and_check(synth, {name: _spec(body, inputs, extra, INITS.get(name, ""))
                                   for name, (body, inputs, extra, _) in CASES.items()})


@pytest.mark.parametrize("name", sorted(CASES))
def test_lowered_to_triton_and_correct(name: str, lowered: dict[str, dict[str, Any]]) -> None:
    result = lowered[name]
    prop = result["proposal"]
    assert prop.fallback_nodes == (), prop.fallback_nodes
    assert f"def {CASES[name][3]}" in prop.source
    assert result["error"] == "", result["error"]
    bad = [t for t in result["trials"] if not t["ok"]]
    assert result["ok"] and not bad, bad


def test_epilogue_fuses_into_the_moving_kernel(lowered: dict[str, dict[str, Any]]) -> None:
    """``F.embedding(x, w).relu()`` and ``flip(x) * 2``: one kernel each, the pointwise op in it."""
    for name in ("embedding_relu", "flip"):
        src = lowered[name]["proposal"].source
        assert src.count("@triton.jit") == 1, name


def test_collide_knob(synth: OfflineSynthesizer) -> None:
    """``ordered`` is offered for float index_add / scatter_add only, and replaces the atomics
    by an in-order walk of the indices; the ordered candidate is correct too."""
    body, inputs, _, _ = CASES["index_add"]
    src = _spec(body, inputs)
    space = dict(synth.space(src, "index_add"))
    assert list(space["g0.collide"]) == ["atomic", "ordered"]
    atomic, _, _ = synth.lower(synth.captured(src, "index_add"), {})
    ordered, _, _ = synth.lower(synth.captured(src, "index_add"), {"g0.collide": "ordered"})
    assert "tl.atomic_add" in atomic and "tl.atomic_add" not in ordered and "for i in range(I):" in ordered
    int_body, int_inputs, _, _ = CASES["index_add_int"]
    assert "g0.collide" not in dict(synth.space(_spec(int_body, int_inputs), "index_add_int"))
    scatter_body, scatter_inputs, _, _ = CASES["scatter_add"]
    scatter_src = _spec(scatter_body, scatter_inputs)
    scatter, _, _ = synth.lower(synth.captured(scatter_src, "scatter_add"), {"g0.collide": "ordered"})
    results = run_in_subprocess([
        {"id": "o1", "spec_source": src, "candidate_source": ordered, "seeds": [1, 2]},
        {"id": "o2", "spec_source": scatter_src, "candidate_source": scatter, "seeds": [1, 2]}])
    assert [r["ok"] for r in results] == [True, True], results


def test_boolean_masks_are_not_claimed(synth: OfflineSynthesizer) -> None:
    """``x[x > 0]`` has a data-dependent shape: no index kernel (torch's indexing, as before)."""
    src = _spec("x[x > 0] * 2", [f"{R}(7, 5)"])
    assert "index_take" not in synth.lower(synth.captured(src, "mask"), {})[0]


def test_rank_change_is_refused(synth: OfflineSynthesizer) -> None:
    """Kernels are specialised to the captured rank: another rank is a clear refusal."""
    body, inputs, _, _ = CASES["tril_triu"]
    src = _spec(body, inputs, [f"{R}(33, 2)"])
    source, _, _ = synth.lower(synth.captured(src, "tril_rank"), {})
    (result,) = run_in_subprocess([{"id": "r", "spec_source": src, "candidate_source": source, "seeds": [1]}])
    assert not result["ok"] and "an output of rank 3" in result["error"]


@pytest.mark.parametrize("name", ["embedding_bag_hashed_ids", "dlrm_interaction", "jagged_segment_sum",
                                  "bucketized_features"])
def test_recommendation_examples_fully_triton(name: str, synth: OfflineSynthesizer) -> None:
    """The recommendation-model examples (their correctness: test_examples_correct) leave
    nothing to the library."""
    src = example_source(name)
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    assert prop.fallback_nodes == ()
    assert "@triton.jit" in prop.source
