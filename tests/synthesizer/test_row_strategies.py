"""Row-family strategies on awkward sizes: every strategy forced on specs with
non-power-of-2 rows longer than a chunk, single rows, tiny row counts, column and
mid-dim reductions, batch-norm statistics, full reductions, scans and strided
operands; the run-time (``auto``) choice at sizes that take each of its branches; and
lean launchers."""

from __future__ import annotations

import re

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import ProposalRequest

from .conftest import EXAMPLES, example_source

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\n"
PLAIN_INIT = "    def __init__(self):\n        super().__init__()\n\n"


def _spec(forward: str, inputs: str, extra: str = "[]", init: str = PLAIN_INIT, init_inputs: str = "[]") -> str:
    return (HEAD + "class Model(nn.Module):\n" + init + "    def forward(self, " + forward + "\n\n\n"
            f"def get_inputs():\n    return {inputs}\n\n\ndef get_init_inputs():\n    return {init_inputs}\n\n\n"
            f"def get_extra_inputs():\n    return {extra}\n")


BN_INIT = "    def __init__(self, c):\n        super().__init__()\n        self.bn = nn.BatchNorm2d(c)\n\n"
NORM_INIT = ("    def __init__(self):\n        super().__init__()\n        self.ln = nn.LayerNorm(300)\n"
             "        self.gn = nn.GroupNorm(3, 6)\n\n")
W_INIT = "    def __init__(self):\n        super().__init__()\n        self.w = nn.Parameter(torch.randn(6, 1))\n\n"

SPECS = {
    # rows longer than a chunk, a single row, rows shorter than any block
    "softmax_long": _spec("x):\n        return torch.softmax(x * 0.5, dim=-1), x.argmax(dim=-1)",
                          "[torch.randn(3, 1000)]", "[[torch.randn(1, 777)], [torch.randn(5, 3)]]"),
    # column reductions: few kept columns, many kept columns, one row, one column
    "col_stats": _spec("x):\n        return x.mean(dim=0), torch.std(x, dim=0, keepdim=True), x.amax(dim=0), "
                       "x.argmin(dim=0)",
                       "[torch.randn(301, 5)]",
                       "[[torch.randn(97, 70)], [torch.randn(1, 3)], [torch.randn(700, 1)]]"),
    # mid-dim reductions with full-size and per-row outputs
    "mid_ops": _spec("x):\n        return torch.log_softmax(x, dim=1), x.argmax(dim=1), x.var(dim=1), "
                     "torch.softmax(x, dim=1).sum(dim=1, keepdim=True)",
                     "[torch.randn(3, 37, 19)]", "[[torch.randn(2, 300, 7)], [torch.randn(1, 5, 1)]]"),
    # batch norm statistics over (N, H, W) per channel, then normalize + affine + relu
    "bn_module": _spec("x):\n        return torch.relu(self.bn(x)) * 2.0", "[torch.randn(3, 5, 7, 9)]",
                       "[[torch.randn(40, 5, 11, 13)], [torch.randn(2, 5, 1, 1)]]", BN_INIT, "[5]"),
    # full reductions (losses, sums, norms, max, prod) with scalar and full-size outputs
    "full_losses": _spec("x, y):\n        return F.mse_loss(x, y), x.sum(), x / torch.norm(x), x.amax(), "
                         "torch.prod(torch.sigmoid(x) + 0.5)",
                         "[torch.randn(7, 300), torch.randn(7, 300)]",
                         "[[torch.randn(1, 5000), torch.randn(1, 5000)], [torch.randn(1, 1), torch.randn(1, 1)]]"),
    # scans walked in chunks carry their running value (reverse scans from the end)
    "scans": _spec("x):\n        r = torch.flip(torch.cumsum(torch.flip(x, [1]), 1), [1])\n"
                   "        return torch.cumsum(x, dim=1) - x, r, torch.cumprod(torch.sigmoid(x) + 0.5, dim=1)",
                   "[torch.randn(3, 700)]", "[[torch.randn(1, 1500)], [torch.randn(4, 2)]]"),
    # a partially broadcast parameter and a transposed (non-contiguous) input: strided reads
    "strided_ops": _spec("x, y):\n        t = y.transpose(0, 1)\n        return (x * self.w).sum(), t.sum(dim=1), "
                         "(x * self.w).mean(dim=(0, 2)), torch.softmax(t, dim=0)",
                         "[torch.randn(3, 6, 50), torch.randn(40, 13)]",
                         "[[torch.randn(1, 6, 333), torch.randn(3, 300)]]", W_INIT),
    # layer norm (weights along the row), group norm, cross-entropy's picked logit
    "norms": _spec("x, z, t):\n        return self.ln(x), self.gn(z), F.cross_entropy(x, t)",
                   "[torch.randn(5, 300), torch.randn(2, 6, 77), torch.randint(0, 300, (5,))]",
                   "[[torch.randn(1, 300), torch.randn(1, 6, 1000), torch.randint(0, 300, (1,))]]", NORM_INIT),
}

# sizes that take each branch of the run-time choice in the interpreter (the interpreter
# has no SM count: the launcher uses H100-sized constants everywhere)
AUTO = _spec("x, y, z):\n        return torch.softmax(x, dim=-1), y.mean(dim=0), z.amax(dim=1), x.sum()",
             "[torch.randn(2, 33000), torch.randn(22000, 3), torch.randn(5, 1300, 53)]")
BN_BIG = _spec("x):\n        return torch.relu(self.bn(x))", "[torch.randn(160, 3, 12, 12)]",
               "[[torch.randn(2, 3, 5, 7)]]", BN_INIT, "[3]")
# rows between SINGLE_TILE and SPLIT_MIN_WORK elements (row_launcher.py)
NARROW = _spec("x, y, z):\n        return torch.softmax(x, dim=-1), y.mean(dim=0), z.amax(dim=1), x.sum()",
               "[torch.randn(2, 12000), torch.randn(12000, 3), torch.randn(5, 1300, 53)]")
SMALL = _spec("x, y, z):\n        return torch.softmax(x, dim=-1), y.mean(dim=0), z.amax(dim=1), x.sum()",
              "[torch.randn(4, 300), torch.randn(30, 3), torch.randn(5, 20, 53)]")

# Runs candidates once in the interpreter: whether they match the reference and which
# row kernels they launched (argv: a JSON list of [reference path, candidate path]).
LAUNCHED = """
import importlib.util, json, sys
import torch
def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
class Spy:
    def __init__(self, name, kernel, launched):
        self.name, self.kernel, self.launched = name, kernel, launched
    def __getitem__(self, grid):
        self.launched.append([self.name, list(grid)])
        return self.kernel[grid]
out = []
for k, (ref_path, cand_path) in enumerate(json.loads(sys.argv[1])):
    ref, cand = load(ref_path, f"ref{k}"), load(cand_path, f"cand{k}")
    launched = []
    for name, obj in list(vars(cand).items()):
        if name.startswith("row_") and hasattr(obj, "__getitem__"):
            setattr(cand, name, Spy(name, obj, launched))
    torch.manual_seed(0)
    inputs = ref.get_inputs()
    torch.manual_seed(1)
    want = ref.Model(*ref.get_init_inputs())(*inputs)
    torch.manual_seed(1)
    got = cand.ModelNew(*ref.get_init_inputs())(*inputs)
    want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
    ok = all(torch.allclose(g.double(), w.double(), atol=1e-4, rtol=1e-4) for g, w in zip(got, want))
    out.append({"ok": ok, "launched": launched})
print(json.dumps(out))
"""


def _launched(cases: list[tuple[str, str]], tmp_path) -> list[tuple[bool, list[str]]]:
    """(matches the reference, row kernels launched) of each (spec, candidate) source pair."""
    import json
    import os
    import subprocess
    import sys

    paths = []
    for k, (spec_source, candidate_source) in enumerate(cases):
        (tmp_path / f"ref{k}.py").write_text(spec_source)
        (tmp_path / f"cand{k}.py").write_text(candidate_source)
        paths.append([str(tmp_path / f"ref{k}.py"), str(tmp_path / f"cand{k}.py")])
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run([sys.executable, "-c", LAUNCHED, json.dumps(paths)],
                          capture_output=True, text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    return [(r["ok"], [name.rsplit("_", 1)[-1] for name, _ in r["launched"]]) for r in results]


def _row_genome(synth: OfflineSynthesizer, src: str, name: str, **knobs: str) -> dict[str, str]:
    space = dict(synth.space(src, name))
    genome: dict[str, str] = {}
    for key, choices in space.items():
        if key.endswith(".strategy"):
            group = key[: -len(".strategy")]
            for knob, value in knobs.items():
                if knob == "strategy" and value not in choices:
                    continue
                genome[f"{group}.{knob}"] = value
    return genome


def test_forced_strategies_on_awkward_sizes(synth: OfflineSynthesizer) -> None:
    jobs = []
    used: dict[str, int] = {}
    for name, src in SPECS.items():
        for strategy in ("single", "looped", "online", "split"):
            genome = _row_genome(synth, src, name, strategy=strategy, BLOCK_N="64")
            if strategy not in genome.values():
                continue
            used[strategy] = used.get(strategy, 0) + 1
            source, full, fallback = synth.lower(synth._capture(src, name), genome)
            assert not fallback, (name, fallback)
            forced = [k for k, v in genome.items() if k.endswith(".strategy")]
            assert all(full[k] == genome[k] for k in forced)
            jobs.append({"id": f"{name}/{strategy}", "spec_source": src, "candidate_source": source, "seeds": [3]})
    assert used["split"] >= 6 and used["online"] >= 4 and used["looped"] == len(SPECS)
    results = run_in_subprocess(jobs)
    bad = [(r["id"], r["error"][-600:], [t for t in r["trials"] if not t["ok"]]) for r in results if not r["ok"]]
    assert not bad, bad


@pytest.mark.parametrize(("shape", "warps", "offered"), [
    ((256, 257), "4", False), ((7, 300), "4", True), ((7, 300), "1", True), ((1, 16384), "4", True),
    ((1, 16384), "8", True), ((1, 16384), "1", False), ((1, 16384), "2", False), ((1, 65536), "8", False)])
def test_single_is_offered_only_for_rows_that_fit_a_block(synth: OfflineSynthesizer, shape: tuple[int, int],
                                                          warps: str, offered: bool) -> None:
    """Whole rows in registers past 2^14 elements (fewer for fewer warps: the same share
    per thread as 2^14 at 4 warps) compile for tens of seconds or more, so the knob leaves
    "single" out and a genome that asks for it gets the run-time choice; shorter extents
    keep it."""
    src = _spec("x):\n        return (x * 2.0).sum()", f"[torch.randn{shape}]")
    key = next(k for k, _ in synth.space(src, "full_sum") if k.endswith(".strategy"))
    warps_key = key.replace(".strategy", ".num_warps")
    space = dict(synth.space(src, "full_sum", {warps_key: warps}))
    strategies = space[key]
    assert "auto" in strategies and "looped" in strategies
    assert ("single" in strategies) is offered
    _, full, _ = synth.lower(synth._capture(src, "full_sum"), {key: "single", warps_key: warps})
    assert full[key] == ("single" if offered else "auto")
    assert full[warps_key] == warps


# A column reduction (col tiles) and a row reduction (row tiles), rows long enough for the
# largest BLOCK_N
TILE_SPECS = {
    "col": _spec("x):\n        return torch.std(x, dim=0, unbiased=False, keepdim=True)", "[torch.randn(5000, 64)]"),
    "row": _spec("x):\n        return torch.softmax(x, dim=-1)", "[torch.randn(64, 5000)]"),
}


@pytest.mark.parametrize("orient", list(TILE_SPECS))
@pytest.mark.parametrize("warps", ["1", "2", "4", "8"])
def test_register_tiles_are_bounded_per_warp(synth: OfflineSynthesizer, tmp_path, orient: str, warps: str) -> None:
    """BLOCK_M * BLOCK_N stays within MAX_TILE elements at 4 warps and proportionally less
    for fewer warps, whatever the genome asks: a 64 x 2048 tile (std_cols seed variant
    BLOCK_N=2048) took 570 s to compile for sm_90."""
    import importlib.util

    import torch

    from ke_synthesizer.offline.families.row.row_launcher import MAX_TILE, tile_limit

    src = TILE_SPECS[orient]
    strategies = dict(synth.space(src, orient, {"g0.num_warps": warps}))["g0.strategy"]
    for strategy in strategies:
        genome = {"g0.strategy": strategy, "g0.BLOCK_M": "64", "g0.BLOCK_N": "2048", "g0.num_warps": warps}
        source, full, _ = synth.lower(synth._capture(src, orient), genome)
        assert full["g0.strategy"] == strategy
        path = tmp_path / f"cand_{orient}_{strategy}_{warps}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        (plan_fn,) = [v for k, v in vars(mod).items() if k.startswith("_plan_row_")]
        x = torch.empty((5000, 64) if orient == "col" else (64, 5000), device="meta")
        kind, _, _, bm, bn, bs, *_ = plan_fn(x)
        assert kind > 0 and bm * bn <= tile_limit(MAX_TILE, int(warps)), (strategy, kind, bm, bn)
        assert bm * bs <= tile_limit(MAX_TILE, int(warps)), (strategy, kind, bm, bs)


def test_auto_choice_at_sizes_of_each_branch(synth: OfflineSynthesizer, tmp_path) -> None:
    cases = {
        # short rows: whole rows in registers
        "small": (SMALL, {}, ["single", "single", "single", "single"]),
        # 2 rows of 33000: split (online max/exp-sum partials); a 22000 x 3 column mean:
        # column split; mid-dim max with 53 kept columns in 5 blocks: split; sum of all
        "long": (AUTO, {}, ["part1", "finish"] * 4),
        # one row / kept column per program, 12000 elements each: under SPLIT_MIN_WORK a
        # block's work does not pay for a second launch -> online / looped; 1300 reduced
        # elements of one kept column fit a register tile -> single; sum of all (24000)
        "narrow": (NARROW, {"BLOCK_M": "1"}, ["online", "looped", "single", "part1", "finish"]),
        # the same at 22000-33000 elements a block: split (a looped program walks its row one
        # BLOCK_N chunk after another; 16 such rows of 57,344 cost an H100 51 us more than
        # the split, row_launcher.SPLIT_MIN_WORK)
        "narrow_long": (AUTO, {"BLOCK_M": "1"}, ["part1", "finish", "part1", "finish", "single", "part1", "finish"]),
        # batch norm of 3 channels over 23040 elements: statistics (Welford partials), then
        # normalize + affine + relu
        "bn_big": (BN_BIG, {}, ["part1", "finish"]),
    }
    pairs = []
    for name, (src, knobs, _) in cases.items():
        genome = _row_genome(synth, src, name, **knobs)
        source, full, _ = synth.lower(synth._capture(src, name), genome)
        assert {v for k, v in full.items() if k.endswith(".strategy")} == {"auto"}
        pairs.append((src, source))
    for (name, (_, _, expect)), (ok, launched) in zip(cases.items(), _launched(pairs, tmp_path), strict=True):
        assert ok, name
        assert launched == expect, (name, launched)


def test_column_and_batch_norm_kernels(synth: OfflineSynthesizer) -> None:
    for name in ("col_mean", "std_cols", "log_softmax_mid", "argmin_mid", "max_mid_dim"):
        src = example_source(name)
        (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
        # each program owns contiguous kept columns and reduces along axis 0
        assert "tl.arange(0, BLOCK_M)[None, :]" in prop.source and "axis=0" in prop.source, name
        assert "[BLOCK_N, BLOCK_M]" in prop.source or name not in ("col_mean", "std_cols"), name
    src = example_source("batchnorm_train_plain")
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name="bn", count=1))
    part1 = prop.source.split("_part1(")[1].split("@triton.jit")[0]
    # mean and var share one sum of x (CSE); the centred sum of squares comes from the same
    # pass (Welford): statistics kernel, then the normalizing kernel
    assert part1.count("tl.store(part_ptr") == 2 and "Welford" in part1
    assert "_part2[" not in prop.source and "_finish[" in prop.source
    assert "tl.load(in1_ptr + rows, mask=rmask" in prop.source  # per-channel gamma read once per row block
    assert ".permute(" not in prop.source  # the output is written in its natural layout


def _row_launchers(source: str) -> list[str]:
    return re.findall(r"^def launch_row_.*?(?=^\S)", source, flags=re.S | re.M)


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n in {
    "batchnorm_train_plain", "col_mean", "layernorm_functional", "cross_entropy", "log_softmax_mid", "mse_plain",
    "rmsnorm", "softmax_rows", "sum_all", "kl_div_rows"}])
def test_row_launchers_are_lean(name: str, synth: OfflineSynthesizer) -> None:
    src = example_source(name)
    (prop,) = synth.propose(ProposalRequest(spec_source=src, spec_name=name, count=1))
    launchers = _row_launchers(prop.source)
    assert launchers
    for launcher in launchers:
        for banned in ("broadcast_shapes", "math.prod", "torch.zeros", " for ", ".expand(", ".reshape("):
            assert banned not in launcher, (banned, launcher)
