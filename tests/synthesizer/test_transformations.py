"""Every one-step transformation of a seed is a correct candidate, across kernel kinds
(pointwise, row reductions in both strategies, matmul epilogues)."""

from __future__ import annotations

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest

from .conftest import example_source

# one spec per kernel kind / strategy family, kept small for the interpreter
EDGE_SPECS = ["silu_clamp_mul", "layernorm", "argmin_mid", "linear_softmax", "cumsum_rows", "mm_plain",
              "attention_plain", "conv2d_bias_relu", "avgpool2d_padded", "maxpool3d_gelu"]
# row kernels forced onto the chunked strategy with short chunks (several passes per row)
LOOPED_SPECS = ["softmax_rows", "variance_rows", "layernorm", "argmax_rows", "prod_rows", "rmsnorm",
                "relu_min_values", "logsumexp_rows", "cross_entropy", "l2_normalize", "mse_plain", "col_mean",
                "spatial_mean"]


@pytest.fixture(scope="module")
def edge_results(synth: OfflineSynthesizer) -> dict[str, list[dict]]:
    jobs, meta = [], {}
    for name in EDGE_SPECS:
        src = example_source(name)
        (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        parent = ParentInfo("seed", seed.source, seed.transformation, dict(seed.genome))
        children = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=100, parent=parent))
        meta[name] = (seed, children)
        for i, child in enumerate(children):
            jobs.append({"id": f"{name}/{i}", "spec_source": src, "candidate_source": child.source,
                         "seeds": [5], "extra": i % 3 == 0})
    results: dict[str, list[dict]] = {name: [] for name in EDGE_SPECS}
    for r in run_in_subprocess(jobs):
        results[r["id"].split("/")[0]].append(r)
    return {name: (meta[name], results[name]) for name in EDGE_SPECS}  # type: ignore[misc]


@pytest.mark.parametrize("name", EDGE_SPECS)
def test_all_one_step_children_are_correct(name: str, edge_results) -> None:
    (seed, children), results = edge_results[name]
    assert len(children) >= 5
    assert len({tuple(sorted(c.genome.items())) for c in children}) == len(children)
    assert all(c.genome != seed.genome for c in children)
    bad = [(children[int(r["id"].split("/")[1])].transformation, r["error"][-300:], r["trials"])
           for r in results if not r["ok"]]
    assert not bad, bad


def test_chunked_row_strategies_are_correct(synth: OfflineSynthesizer) -> None:
    jobs = []
    used = {"online": 0, "split": 0}
    for name in LOOPED_SPECS:
        src = example_source(name)
        space = dict(synth.space(src, name))
        row_keys = [k for k in space if k.endswith(".strategy")]
        assert row_keys, name
        for strategy in ("looped", "online", "split"):
            genome = {}
            for k in row_keys:
                genome[k] = strategy if strategy in space[k] else "looped"
                genome[k.replace(".strategy", ".BLOCK_N")] = "256"
            if strategy != "looped":
                if strategy not in genome.values():
                    continue
                used[strategy] += 1
            source, full, _ = synth.lower(synth._capture(src, name), genome)
            assert ("for start in range(0, N, BLOCK_N)" in source) == (set(genome.values()) != {"split", "256"})
            if strategy != "split":  # split uses the online pairs when the group has them
                assert ("online max + sum of exp" in source) == (strategy == "online")
            assert ("tl.store(part_ptr + " in source) == (strategy == "split")
            assert "_single[" not in source  # a forced strategy emits only its own kernels
            assert all(full[k.replace(".strategy", ".BLOCK_N")] == "256" for k in row_keys)
            jobs.append({"id": f"{name}/{strategy}", "spec_source": src, "candidate_source": source, "seeds": [4]})
    assert used["online"] >= 2 and used["split"] >= 2
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-400:], r["trials"]) for r in results if not r["ok"]]


def test_space_lists_knobs_per_kernel_kind(synth: OfflineSynthesizer) -> None:
    space = dict(synth.space(example_source("linear_softmax"), "linear_softmax"))
    assert space["fusion"][0] == "greedy"
    assert {"g0.BLOCK_M", "g0.BLOCK_N", "g0.BLOCK_K", "g0.GROUP_M", "g0.num_stages"} <= set(space)
    assert space["g0.precision"] == ["tf32x3", "ieee"]  # tf32 is opt-in per spec
    assert {"g1.strategy", "g1.BLOCK_M", "g1.num_warps"} <= set(space)
    assert space["g1.strategy"] == ["auto", "single", "looped", "online", "split"]  # auto: chosen at run time
    assert "g1.BLOCK_N" in space  # auto may walk long rows in chunks
    single = dict(synth.space(example_source("linear_softmax"), "linear_softmax", {"g1.strategy": "single"}))
    assert "g1.BLOCK_N" not in single  # only meaningful for the chunked strategies
    # a spec that declares a loose KE_TOLERANCE may use TF32 dot products
    tolerant = dict(synth.space(example_source("linear_tf32_tolerant"), "linear_tf32_tolerant"))
    assert tolerant["g0.precision"] == ["tf32x3", "ieee", "tf32"]
    # attention written in plain ops can be lowered as one flash kernel or left unfused
    assert dict(synth.space(example_source("attention_plain"), "attention_plain"))["attention"] == ["flash", "unfused"]


def test_persistent_programs_cover_every_tile(synth: OfflineSynthesizer) -> None:
    # more tiles than programs, so each program walks several tiles
    cases = {"silu_clamp_mul": {"g0.programs": "128", "g0.BLOCK_SIZE": "256"},  # 281 tiles
             "max_mid_dim": {"g0.programs": "128", "g0.BLOCK_M": "1"}}  # 768 rows
    jobs = []
    for name, genome in cases.items():
        src = example_source(name)
        source, full, _ = synth.lower(synth._capture(src, name), genome)
        assert full["g0.programs"] == "128"
        assert "tl.num_programs(0)" in source and "# persistent programs" in source
        jobs.append({"id": name, "spec_source": src, "candidate_source": source, "seeds": [6]})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-400:]) for r in results if not r["ok"]]


def test_fusion_boundaries_are_knobs(synth: OfflineSynthesizer) -> None:
    jobs = []
    for name, key in (("linear_bias_relu", "epilogue.linear"), ("rmsnorm", "prologue.mean")):
        src = example_source(name)
        space = dict(synth.space(src, name))
        assert space[key] == ["fused", "separate"]
        fused, _, _ = synth.lower(synth._capture(src, name), {})
        split, full, _ = synth.lower(synth._capture(src, name), {key: "separate"})
        assert full[key] == "separate"
        assert split.count("@triton.jit") == fused.count("@triton.jit") + 1
        jobs.append({"id": name, "spec_source": src, "candidate_source": split, "seeds": [2]})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), [(r["id"], r["error"][-400:]) for r in results if not r["ok"]]
