"""The recurrent family's ``persistent`` knob: one launch per layer whose programs each own
a block of batch rows and every hidden unit and loop over time inside the kernel, instead
of one launch per time step, with W_hh streamed (``on``) or the layer held in registers
(``resident``). Correct against the module in the interpreter (LSTM, GRU, tanh / relu RNN;
one and two layers and directions; both layouts; initial states given or not; odd sizes;
hidden sizes spanning several tiles; batch rows a program; fp32 and fp16), the same source
and kernel count at any sequence length, the seed resident up to the resident bound (and
correct on both sides of it), each form offered only under its capacity rule, carried by
the genome from a parent to its children, and compiled for an H100."""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import triton

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from ke_synthesizer.offline.emit.kernel_sharing import count_kernels
from ke_synthesizer.offline.families.recurrent.kernel_recurrent import (
    PERSISTENT_MAX_WEIGHTS,
    RESIDENT_MAX_WEIGHTS,
)
from kernelevolve.ports.synthesis import ParentInfo, ProposalRequest

from .conftest import EXAMPLES_DIR
from .test_kernel_economy import _large
from .test_recurrent import _spec

ON = {"g0.persistent": "on"}
RES = {"g0.persistent": "resident"}
# BLOCK_H = BLOCK_K = 16 under hidden 20: two hidden tiles per step, two K chunks per tile
TILED = {**ON, "g0.BLOCK_H": "16", "g0.BLOCK_K": "16"}

# (class, batch_first, layers, hidden, steps, extra constructor arguments | variant, batch, genome);
# the odd sizes: batch 3, hidden 20, 7 input features, 5 steps
CASES: list[tuple[str, bool, int, int, int, str, int, dict[str, str]]] = [
    ("LSTM", True, 1, 20, 5, "", 3, ON),
    ("LSTM", False, 2, 20, 5, ", bidirectional=True|state", 3, TILED),
    ("LSTM", True, 2, 20, 5, ", bidirectional=True", 3, ON),
    ("LSTM", True, 2, 20, 5, "|state", 3, TILED),
    ("LSTM", False, 1, 20, 5, ", bidirectional=True|unbatched", 3, ON),
    ("GRU", True, 2, 20, 5, ", bidirectional=True", 3, TILED),
    ("GRU", False, 1, 20, 5, "|state", 3, ON),
    ("GRU", False, 2, 20, 5, ", bias=False|state", 3, TILED),
    ("RNN", True, 2, 20, 5, "|state", 3, ON),
    ("RNN", False, 1, 20, 5, ", bidirectional=True, nonlinearity='relu'", 3, TILED),
    ("RNN", True, 2, 20, 5, ", nonlinearity='relu', bias=False", 3, ON),
    # a batch past one program's 16 rows (three programs per direction), a single step
    ("LSTM", False, 1, 20, 5, ", bidirectional=True", 33, TILED),
    ("GRU", True, 1, 20, 1, ", bidirectional=True|state", 3, ON),
    # the tf32x3 default and ieee alike
    ("LSTM", True, 1, 20, 5, "|state", 3, {**ON, "g0.precision": "ieee"}),
]


def _name(case: tuple[Any, ...]) -> str:
    cls, bf, layers, hidden, steps, extra, batch, genome = case
    variant = extra.partition("|")[2]
    tags = [cls, f"bf{bf}", f"l{layers}", f"b{batch}", f"t{steps}", "bidir" * ("bidirectional" in extra),
            "relu" * ("relu" in extra), "nobias" * ("bias=False" in extra), variant,
            "tiled" * (genome.get("g0.BLOCK_H") == "16"), genome.get("g0.precision", "")]
    return "_".join(t for t in tags if t)


def _persistent(source: str) -> bool:
    """The candidate launches the persistent kernel and no per-step loop."""
    return "_seq[grid_q](" in source and "for step in range(T)" not in source and "_step" not in source


def _resident(source: str) -> bool:
    """The candidate launches the resident kernel and no per-step loop."""
    return "_res[grid_q](" in source and "for step in range(T)" not in source and "_step" not in source


def _resident_genome(genome: dict[str, str]) -> dict[str, str]:
    """A case's genome for the resident form: the hidden tiles mean nothing there, so the
    tiled cases take 16 batch rows a program instead (the automatic choice otherwise)."""
    return {**RES, "g0.BLOCK_B": "16"} if "g0.BLOCK_H" in genome else {**RES, **{
        k: v for k, v in genome.items() if k == "g0.precision"}}


@pytest.fixture(scope="module")
def checked() -> dict[str, tuple[str, dict[str, Any]]]:
    """Every case lowered with the knob on and resident (ids ``<case>/on``, ``<case>/res``),
    checked against the module in one interpreter subprocess (fp32: the checker's 1e-4
    tolerance)."""
    synth = OfflineSynthesizer()
    sources: dict[str, tuple[str, str]] = {}
    for case in CASES:
        cls, bf, layers, hidden, steps, extra, batch, genome = case
        src = _spec(cls, bf, layers, hidden, steps, extra, batch=batch, in_f=7)
        captured = synth.captured(src, _name(case))
        resident = _resident_genome(genome)
        for form, g in (("on", genome), ("resident", resident),
                        ("resident_noprefetch", {**resident, "g0.prefetch": "off"}),
                        ("resident_fused", {**resident, "g0.input_proj": "fused"})):
            source, full, fallback = synth.lower(captured, g)
            assert not fallback and full["g0.persistent"] == form.partition("_")[0], (fallback, full)
            sources[f"{_name(case)}/{form}"] = (src, source)
    results = run_in_subprocess([{"id": k, "spec_source": s, "candidate_source": c, "seeds": [1, 2]}
                                 for k, (s, c) in sources.items()])
    by_id = {r["id"]: r for r in results}
    return {k: (c, by_id[k]) for k, (_s, c) in sources.items()}


def _kernel_kinds(source: str) -> list[str]:
    return [k.rsplit("_", 1)[-1] for k in re.findall(r"^def (rnn_\w+)\(", source, re.MULTILINE)]


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_the_persistent_kernel_matches_the_module(case: tuple[Any, ...],
                                                 checked: dict[str, tuple[str, dict[str, Any]]]) -> None:
    source, result = checked[f"{_name(case)}/on"]
    assert result["ok"], result
    assert _persistent(source), source
    # two kernels: the input projection and the persistent one
    assert _kernel_kinds(source) == ["proj", "seq"], source


@pytest.mark.parametrize("prefetch", [True, False], ids=["prefetch", "noprefetch"])
@pytest.mark.parametrize("case", CASES, ids=_name)
def test_the_resident_kernel_matches_the_module(case: tuple[Any, ...], prefetch: bool,
                                               checked: dict[str, tuple[str, dict[str, Any]]]) -> None:
    source, result = checked[f"{_name(case)}/resident" + ("" if prefetch else "_noprefetch")]
    assert result["ok"], result
    assert _resident(source), source
    # two kernels: the input projection and the resident one; W_hh loaded before the time loop
    assert _kernel_kinds(source) == ["proj", "res"], source
    body = source[source.index("_res(xp_ptr"):source.index("def launch_rnn_")]
    loop = body.index("for step in range(0, T):")
    assert body.index("w0 = tl.load(") < loop, body
    assert "tl.debug_barrier" not in body and "h0_ptr + state" in body
    # prefetch: the first step's projection before the loop, the next one's ahead of the dots
    assert (body.index("x0 = tl.load(") < loop) is prefetch, body
    assert ("n0 = tl.load(" in body) is prefetch and body.index("a0 = tl.dot(") > loop, body


@pytest.mark.parametrize("case", CASES, ids=_name)
def test_the_resident_kernel_with_the_input_projection_fused_matches_the_module(
        case: tuple[Any, ...], checked: dict[str, tuple[str, dict[str, Any]]]) -> None:
    """``input_proj`` = fused: one kernel, no projection launch and no projection buffer;
    W_ih and b_ih loaded before the time loop."""
    source, result = checked[f"{_name(case)}/resident_fused"]
    assert result["ok"], result
    assert _resident(source) and _kernel_kinds(source) == ["res"], source
    assert "xp = torch.empty(" not in source and "_res[grid_q](inp," in source
    body = source[source.index("_res(xp_ptr"):source.index("def launch_rnn_")]
    loop = body.index("for step in range(0, T):")
    assert body.index("wi0 = tl.load(") < loop < body.index("x0 = tl.dot(xin, wi0"), body


def test_the_fused_projection_is_offered_where_both_weights_fit() -> None:
    """Only for a resident layer, while gates x HP x (HP + the widest padded input) stays
    under FUSED_MAX_WEIGHTS; a genome naming it elsewhere keeps the separate projection."""
    synth = OfflineSynthesizer()
    # at the bound (3 x 2^13): an LSTM of 32 up to 128 input features, a GRU of 64 up to 64, an
    # RNN of 128 up to 64 (16 padded to 16 fits, 129 padded to 256 does not)
    for cls, hidden, in_f, offered in (("LSTM", 32, 128, True), ("LSTM", 32, 129, False), ("GRU", 64, 64, True),
                                       ("GRU", 64, 65, False), ("RNN", 128, 16, True), ("RNN", 128, 129, False)):
        src = _spec(cls, True, 1, hidden, 2, "", batch=2, in_f=in_f)
        name = f"{cls}_{hidden}_{in_f}"
        keys = dict(synth.space(src, name))
        assert (keys.get("g0.input_proj") == ["separate", "fused"]) is offered, (name, keys)
        assert "g0.input_proj" not in dict(synth.space(src, name, {"g0.persistent": "off"})), name
        source, _, _ = synth.lower(synth.captured(src, name), {"g0.input_proj": "fused"})
        assert ("_proj[grid_p](" not in source) is offered, name
        off, _, _ = synth.lower(synth.captured(src, name), {"g0.input_proj": "fused", "g0.persistent": "off"})
        assert "_proj[grid_p](" in off and "for step in range(T):" in off, name


_HALF = """
import torch
import torch.nn as nn

KE_TOLERANCE = {{"atol": 1e-2, "rtol": 1e-2}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.{cls}(7, 20, num_layers=2, batch_first=True{extra}).to(torch.float16)

    def forward(self, x):
        out, _ = self.rnn(x)
        return out


def get_inputs():
    return [torch.randn(3, 5, 7, dtype=torch.float16)]


def get_init_inputs():
    return []
"""


def test_half_precision_layers_run_persistent_within_the_half_tolerance() -> None:
    """fp16 weights and inputs: fp32 accumulation and gates in registers, h stored as fp16
    between steps as the per-step loop does (the resident kernel carries it in fp32 and
    stores fp16 copies); judged at the spec's fp16 tolerance."""
    synth = OfflineSynthesizer()
    jobs = []
    for cls, extra in (("LSTM", ", bidirectional=True"), ("GRU", ""), ("RNN", ", nonlinearity='relu'")):
        src = _HALF.format(cls=cls, extra=extra)
        captured = synth.captured(src, f"half_{cls}")
        for genome, form in ((TILED, _persistent), (RES, _resident), ({**RES, "g0.input_proj": "fused"}, _resident)):
            source, full, fallback = synth.lower(captured, genome)
            # operands are cast to fp32 first: tf32x3 stays the default, as in the per-step loop
            assert form(source) and not fallback and full["g0.precision"] == "tf32x3"
            jobs.append({"id": f"{cls}/{form.__name__}/{len(genome)}", "spec_source": src, "candidate_source": source,
                         "seeds": [1, 2]})
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), results


def _launcher(source: str) -> str:
    return source[source.index("def launch_rnn_"):source.index("class Model")]


@pytest.mark.parametrize("cls", ["LSTM", "GRU", "RNN"])
def test_source_and_kernel_count_do_not_depend_on_the_sequence_length(cls: str) -> None:
    """The same candidate at 5 and 300 steps; per forward one projection launch per layer and
    direction and one persistent launch per layer, none inside a loop over time."""
    synth = OfflineSynthesizer()
    sources = []
    for steps in (5, 300):
        src = _spec(cls, True, 2, 20, steps, ", bidirectional=True", in_f=7)
        source, _, _ = synth.lower(synth.captured(src, "seq"), ON)
        sources.append(source)
    assert sources[0] == sources[1]
    assert count_kernels(sources[0]) == 3  # the projection, the persistent kernel and _tanh
    launcher = _launcher(sources[0])
    loops = [ln.strip() for ln in launcher.splitlines() if ln.strip().startswith("for ")]
    assert loops == ["for layer in range(2):", "for d in range(2):"], loops
    assert launcher.count("_seq[grid_q](") == 1 and launcher.count("_proj[grid_p](") == 1


def _bound(limit: int, gates: int) -> int:
    """The largest hidden size whose gates x hidden^2 is at most ``limit``."""
    return int((limit // gates) ** 0.5)


def test_the_knob_is_offered_under_the_capacity_rule_only() -> None:
    """gates x hidden^2 <= PERSISTENT_MAX_WEIGHTS: an LSTM up to hidden 128, a GRU up to 147, an
    RNN up to 256; past it the knob is not in the space, and a genome naming it anyway
    keeps the per-step loop."""
    synth = OfflineSynthesizer()
    for cls, gates in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
        bound = _bound(PERSISTENT_MAX_WEIGHTS, gates)
        for hidden, offered in ((bound, True), (bound + 1, False)):
            src = _spec(cls, True, 1, hidden, 2, "", batch=2, in_f=3)
            keys = dict(synth.space(src, f"{cls}_{hidden}"))
            assert ("g0.persistent" in keys) is offered, (cls, hidden, keys)
            if offered:
                # past the seed bound: the per-step loop seeds, the search may turn it on
                assert keys["g0.persistent"] == ["auto", "on"]
                seed, full, _ = synth.lower(synth.captured(src, f"{cls}_{hidden}"), {})
                assert full["g0.persistent"] == "auto" and "for step in range(T):" in seed
                continue
            source, full, _ = synth.lower(synth.captured(src, f"{cls}_{hidden}"), ON)
            assert "g0.persistent" not in full and "for step in range(T):" in source


def _padded_bound(limit: int, gates: int) -> int:
    """The largest hidden size whose gates x (hidden padded to a power of two)^2 is at most
    ``limit``: the padded bound itself, a power of two."""
    return 1 << (int((limit // gates) ** 0.5).bit_length() - 1)


def test_the_seed_runs_resident_up_to_the_resident_bound_and_correct() -> None:
    """gates x HP^2 <= RESIDENT_MAX_WEIGHTS (HP: hidden padded to a power of two; an LSTM up
    to hidden 64, a GRU up to 64, an RNN up to 128): the seed (``auto``) is the resident
    kernel, ``off`` and ``on`` the explicit choices; one past it the seed is the per-step
    loop and ``on`` the only choice (``resident`` not offered, and a genome naming it keeps
    the loop). Both sides of the bound correct in the interpreter."""
    synth = OfflineSynthesizer()
    jobs = []
    for cls, gates in (("LSTM", 4), ("GRU", 3), ("RNN", 1)):
        bound = _padded_bound(RESIDENT_MAX_WEIGHTS, gates)
        for hidden, seeded in ((bound, True), (bound + 1, False)):
            name = f"{cls}_{hidden}"
            src = _spec(cls, False, 1, hidden, 2, "|state", batch=3, in_f=5)
            keys = dict(synth.space(src, name))
            assert keys["g0.persistent"] == (["auto", "off", "on"] if seeded else ["auto", "on"]), (name, keys)
            assert ("g0.BLOCK_H" in keys) is not seeded, keys  # no hidden tiles in the resident kernel
            captured = synth.captured(src, name)
            seed, full, fallback = synth.lower(captured, {})
            assert not fallback and full["g0.persistent"] == "auto"
            assert _resident(seed) is seeded and ("for step in range(T):" in seed) is not seeded, name
            # auto is its explicit twin's code
            assert synth.lower(captured, {"g0.persistent": "resident" if seeded else "off"})[0] == seed
            other, _, _ = synth.lower(captured, ON)
            assert _persistent(other), name
            jobs += [{"id": name, "spec_source": src, "candidate_source": seed, "seeds": [1]}]
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), results


def test_the_knob_round_trips_through_the_genome() -> None:
    """The seed of a small layer runs resident with ``persistent`` auto in its genome; a
    child turns it off (the per-step loop in its source, ``off`` in its genome), and that
    genome, as a parent's, gives children that keep it unless their edge is the knob itself
    (back to auto: resident, or on: persistent)."""
    synth = OfflineSynthesizer()
    src = (EXAMPLES_DIR / "model_lstm_classifier.py").read_text()
    (seed,) = synth.propose(ProposalRequest(spec_source=src, spec_name="rt", count=1))
    assert seed.genome["g0.persistent"] == "auto" and _resident(seed.source)
    parent = ParentInfo("seed", seed.source, seed.transformation, seed.genome)
    children = synth.propose(ProposalRequest(spec_source=src, spec_name="rt", count=100, parent=parent))
    (off,) = [c for c in children if c.genome.get("g0.persistent") == "off"]
    assert off.transformation.name == "persistent" and not _persistent(off.source)
    assert "for step in range(T):" in off.source
    again, full, _ = synth.lower(synth.captured(src, "rt"), off.genome)
    assert again == off.source and full == off.genome
    grand = synth.propose(ProposalRequest(spec_source=src, spec_name="rt", count=100,
                                          parent=ParentInfo("off", off.source, off.transformation, off.genome)))
    assert grand
    for child in grand:
        kept = child.genome["g0.persistent"] == "off"
        assert kept == (child.transformation.name != "persistent"), child.transformation
        assert (_persistent(child.source) or _resident(child.source)) != kept


# the recurrent examples: the ops ones as written, the large ones at shrunk sizes
_EXAMPLES = {
    "model_lstm_classifier": (EXAMPLES_DIR / "model_lstm_classifier.py").read_text(),
    "model_gru_encoder": (EXAMPLES_DIR / "model_gru_encoder.py").read_text(),
    "model_rnn_tanh": (EXAMPLES_DIR / "model_rnn_tanh.py").read_text(),
    "model_lstm_decoder_state": (EXAMPLES_DIR / "model_lstm_decoder_state.py").read_text(),
    "lstm_bidirectional": _large("lstm_bidirectional", batch_size=3, sequence_length=4, input_size=7,
                                 hidden_size=20, num_layers=2, output_size=5),
    "gru_time_major": _large("gru_time_major", SEQ_LEN=4, BATCH=3, IN_FEATURES=7, HIDDEN=20, LAYERS=2),
}


def test_the_recurrent_examples_run_resident_or_persistent_and_correct() -> None:
    """Under the resident bound: the seed is the resident candidate; the persistent one
    correct too."""
    synth = OfflineSynthesizer()
    jobs = []
    for name, src in _EXAMPLES.items():
        captured = synth.captured(src, name)
        source, _, fallback = synth.lower(captured, ON)
        assert _persistent(source) and not fallback, name
        seed, _, fallback = synth.lower(captured, {})
        assert _resident(seed) and not fallback and synth.lower(captured, RES)[0] == seed, name
        jobs += [{"id": f"{name}/on", "spec_source": src, "candidate_source": source, "seeds": [1]},
                 {"id": f"{name}/seed", "spec_source": src, "candidate_source": seed, "seeds": [1]}]
    results = run_in_subprocess(jobs)
    assert all(r["ok"] for r in results), results


@pytest.mark.parametrize(("name", "sizes"), [
    ("lstm_bidirectional", dict(batch_size=2, sequence_length=3, input_size=5, num_layers=1, output_size=4)),
    ("gru_time_major", dict(SEQ_LEN=3, BATCH=2, IN_FEATURES=5, LAYERS=1)),
])
def test_the_large_examples_hidden_sizes_keep_the_per_step_loop(name: str, sizes: dict[str, int]) -> None:
    """At their own hidden sizes (LSTM 1,024, GRU 768; other sizes shrunk) the large examples
    are past the capacity rule: no knob, the per-step loop."""
    src = _large(name, **sizes)
    synth = OfflineSynthesizer()
    assert "g0.persistent" not in dict(synth.space(src, name))
    source, _, _ = synth.lower(synth.captured(src, name), ON)
    assert "for step in range(T):" in source


_PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
# compiles candidates' persistent kernels for sm_90 (argv: file, kernel, element type, ...) and
# prints each cubin's size and its PTX's barriers; run without TRITON_INTERPRET, so that
# @triton.jit makes compiled kernels rather than the interpreter's
_AOT = """
import importlib.util, json, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
args = sys.argv[1:]
for i in range(0, len(args), 3):
    path, name, dtype = args[i:i + 3]
    blocks = {"HAS_BIAS": True, "BLOCK_B": 16, **({"HP": 32} if name.endswith("_res") else
                                                   {"BLOCK_H": 32, "BLOCK_K": 32})}
    spec = importlib.util.spec_from_file_location(f"candidate_aot_{i}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = getattr(module, name)
    if "KP" in kernel.arg_names:  # the fused input projection: 40 features (both directions' 20)
        blocks["KP"] = 64
    signature = {a: "constexpr" if a in blocks else "*fp32" if a == "xp_ptr" else "*" + dtype
                 if a.endswith("_ptr") else "i32" for a in kernel.arg_names}
    constexprs = {(kernel.arg_names.index(a),): v for a, v in blocks.items()}
    compiled = triton.compile(ASTSource(kernel, signature, constexprs=constexprs),
                              target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
    print(json.dumps({"cubin": len(compiled.asm["cubin"]), "barriers": compiled.asm["ptx"].count("bar.sync")}))
"""


@pytest.mark.skipif(not _PTXAS.exists(), reason="triton's NVIDIA backend (ptxas) is not installed")
def test_the_persistent_kernels_compile_for_an_h100(tmp_path: Path) -> None:
    """The interpreter runs a kernel as NumPy and accepts what the compiler would not (a
    loop-carried pointer whose type changes, a barrier inside loops, a loop-carried value
    whose layout changes): compile the LSTM, GRU (fp16) and RNN persistent and resident
    (input projection separate and fused) kernels ahead of time for sm_90 down to cubins, no
    GPU needed, in one subprocess."""
    synth = OfflineSynthesizer()
    args = []
    for (cls, dtype), (form, genome) in itertools.product((("LSTM", "fp32"), ("GRU", "fp16"), ("RNN", "fp32")),
                                                          (("seq", ON), ("res", RES),
                                                           ("res", {**RES, "g0.input_proj": "fused"}))):
        source, _, _ = synth.lower(synth.captured(_spec(cls, True, 2, 20, 5, ", bidirectional=True", in_f=7), cls),
                                   genome)
        path = tmp_path / f"candidate_{cls}_{form}_{len(genome)}.py"
        path.write_text(source)
        (name,) = re.findall(rf"^def (rnn_\w+_{form})\(", source, re.MULTILINE)
        args += [str(path), name, dtype]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-c", _AOT, *args], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outs = [json.loads(line) for line in proc.stdout.strip().splitlines()]
    # the persistent kernels order a step's stores before the next step's loads with a barrier;
    # the resident ones have only the shared-memory exchange of h into tl.dot's operand layout
    assert len(outs) == 9 and all(o["cubin"] > 0 and o["barriers"] >= 1 for o in outs), outs
