"""One kernel per distinct generated body (``emit/kernel_sharing.py``): groups whose kernel
and launcher are the same code up to the group's name share one kernel and one launcher,
so a model's kernel count follows its distinct layer shapes, not its depth; a recurrent
layer (one graph node, a loop over time in its launcher) follows neither its depth in time.
The examples of ``examples/large`` are lowered at shrunk sizes (kernel counts do not depend on sizes, except a recurrent
layer's sequence length, which is what is checked)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.emit.forward_loops import roll
from ke_synthesizer.offline.emit.kernel_sharing import Generated, count_kernels, share
from kernelevolve.ports.synthesis import ProposalRequest
from kernelevolve.spec_shrink import rewrite, size_constants

from .conftest import EXAMPLES_DIR, STYLES_DIR, batched_seed_results

ROOT = Path(__file__).resolve().parents[2]
LARGE = ROOT / "examples" / "large"


def _group(gid: int, body: str = "acc + e0", block: int = 64, ops: str = "matmul_addmm") -> Generated:
    name = f"{ops}_{gid}"
    kernel = (f"@triton.jit\ndef {name}(x_ptr, BLOCK: tl.constexpr):\n    v_add_{gid} = {body}\n"
              f"    tl.store(x_ptr, v_add_{gid})\n")
    launcher = (f"_plans_{name} = {{}}\n\n\ndef launch_{name}(x):\n    plan = _plans_{name}.get(x.shape)\n"
                f"    if plan is None:\n        raise RuntimeError('g{gid}: bad operand')\n"
                f"    {name}[(1,)](x, BLOCK={block})\n    return x\n")
    return Generated(f"g{gid}", kernel, launcher, f"launch_{name}")


def test_groups_identical_up_to_their_names_share_the_first_groups_code() -> None:
    groups = [_group(1), _group(2), _group(10)]
    shared = share(groups)
    assert shared.kernels == [groups[0].kernel]
    assert shared.launchers == [groups[0].launcher]
    assert shared.launcher_of == {"g1": "launch_matmul_addmm_1", "g2": "launch_matmul_addmm_1",
                                  "g10": "launch_matmul_addmm_1"}


def test_a_different_constexpr_or_op_pattern_is_a_kernel_of_its_own() -> None:
    groups = [_group(1), _group(2, block=128), _group(3, body="acc * e0"), _group(4)]
    shared = share(groups)
    # a block size passed at launch is a launcher of its own over the same kernel
    assert len(shared.kernels) == 2 and len(shared.launchers) == 3
    assert "matmul_addmm_1[(1,)](x, BLOCK=128)" in shared.launchers[1]
    assert shared.launcher_of["g4"] == "launch_matmul_addmm_1"
    assert shared.launcher_of["g2"] == "launch_matmul_addmm_2"
    assert shared.launcher_of["g3"] == "launch_matmul_addmm_3"


def test_a_name_that_prefixes_another_is_not_mistaken_for_it() -> None:
    # ``..._1`` is a prefix of ``..._10``: the second must not read as the first renamed
    one = _group(1)
    ten = Generated("g10", one.kernel.replace("matmul_addmm_1(", "matmul_addmm_10("), one.launcher
                    .replace("matmul_addmm_1", "matmul_addmm_10").replace("'g1:", "'g10:"), "launch_matmul_addmm_10")
    odd = Generated("g10", ten.kernel, ten.launcher.replace("_plans_matmul_addmm_10", "_plans_matmul_addmm_1"),
                    "launch_matmul_addmm_10")
    assert share([one, ten]).launcher_of["g10"] == "launch_matmul_addmm_1"
    assert share([one, odd]).launcher_of["g10"] == "launch_matmul_addmm_10"  # reads another group's cache


def test_a_module_without_repeated_bodies_is_unchanged_and_helpers_are_emitted_once() -> None:
    helper = "@triton.jit\ndef _welford_combine(a, b):\n    return a + b\n\n\n"
    a = Generated("g0", helper + _group(0).kernel, _group(0).launcher, "launch_matmul_addmm_0")
    other = _group(1, body="acc - e0")
    b = Generated("g1", helper + other.kernel, other.launcher, "launch_matmul_addmm_1")
    shared = share([a, b])
    assert shared.kernels[0] == a.kernel
    assert shared.kernels[1] == other.kernel
    assert shared.launchers == [a.launcher, b.launcher]
    assert count_kernels("\n".join(shared.kernels)) == 3


def _seed(source: str, name: str) -> str:
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=name, count=1))
    return prop.source


_KERNEL = re.compile(r"^@triton\.jit\ndef (\w+)\((.*?)\n(?=[^\s)])", re.MULTILINE | re.DOTALL)


def _bodies_up_to_names(source: str) -> list[str]:
    """Every kernel's source with its own name and its locals blanked."""
    out = []
    for m in _KERNEL.finditer(source):
        order: dict[str, str] = {}
        for local in re.findall(r"\bv_\w+\b", m.group(2)):
            order.setdefault(local, f"v{len(order)}")
        out.append(re.sub(r"\bv_\w+\b", lambda v, order=order: order[v.group(0)], m.group(2)))
    return out


WHOLE_MODELS = [(EXAMPLES_DIR, p.stem) for p in sorted(EXAMPLES_DIR.glob("model_*.py"))] + \
    [(STYLES_DIR, name) for name in ("model_dense_block", "model_gpt_causal_block", "resnet_make_layer",
                                     "vgg_small", "sequential_loop", "modulelist_loop", "block_super_named")]


@pytest.mark.parametrize(("folder", "name"), WHOLE_MODELS, ids=[n for _, n in WHOLE_MODELS])
def test_whole_models_define_each_kernel_body_once_and_launch_every_launcher(folder: Path, name: str) -> None:
    source = _seed((folder / f"{name}.py").read_text(), name)
    bodies = _bodies_up_to_names(source)
    assert len(bodies) == count_kernels(source)
    assert len(set(bodies)) == len(bodies), f"{name}: a kernel body is defined twice"
    forward = source[source.index("    def forward("):]
    launchers = re.findall(r"^def (launch_\w+)\(", source, re.MULTILINE)
    for launcher in launchers:
        assert f"{launcher}(" in forward, f"{name}: {launcher} is never launched"


# Shared kernels change nothing a candidate computes: whole models with repeated layers
# (residual blocks, transformer layers, recurrent layers) judged in the interpreter.
_JUDGED = [(EXAMPLES_DIR, "model_lstm_classifier"), (EXAMPLES_DIR, "model_gru_encoder"),
           (EXAMPLES_DIR, "model_transformer_block"), (EXAMPLES_DIR, "model_mlp_layer_list"),
           (STYLES_DIR, "resnet_make_layer"), (STYLES_DIR, "model_dense_block")]


def test_models_with_shared_kernels_stay_correct_in_the_interpreter() -> None:
    synth = OfflineSynthesizer()
    results: dict[str, dict[str, Any]] = {}
    for folder in (EXAMPLES_DIR, STYLES_DIR):
        results.update(batched_seed_results(synth, folder, [n for f, n in _JUDGED if f == folder]))
    for name, result in results.items():
        assert result["ok"], (name, {k: v for k, v in result.items() if k != "proposal"})


def _large(name: str, **sizes: int) -> str:
    source = (LARGE / f"{name}.py").read_text()
    return rewrite(source, size_constants(source), sizes)


def test_a_fifty_layer_residual_network_is_at_most_forty_kernels() -> None:
    source = _seed(_large("resnet50_bottleneck", batch_size=2, image_size=32, num_classes=10), "resnet50")
    launches = source.count("= launch_")
    assert launches >= 50  # every layer still launches its own kernels
    assert count_kernels(source) <= 40, count_kernels(source)


@pytest.mark.slow
def test_a_densely_connected_network_is_at_most_forty_kernels() -> None:
    source = _seed(_large("densenet_blocks", BATCH_SIZE=2, IMAGE=32, NUM_CLASSES=10), "densenet")
    assert source.count("= launch_") >= 120
    assert count_kernels(source) <= 40, count_kernels(source)


@pytest.mark.parametrize(("name", "step"), [("lstm_bidirectional", "sequence_length"), ("gru_time_major", "SEQ_LEN")])
def test_a_recurrent_layers_kernels_and_source_do_not_depend_on_sequence_length(name: str, step: str) -> None:
    small = {"lstm_bidirectional": dict(batch_size=2, input_size=8, hidden_size=8, output_size=4),
             "gru_time_major": dict(BATCH=2, IN_FEATURES=8, HIDDEN=8)}[name]
    sources = [_seed(_large(name, **small, **{step: steps}), name) for steps in (4, 16)]
    assert count_kernels(sources[0]) == count_kernels(sources[1]) <= 10
    assert sources[0] == sources[1]  # the candidate's size too: no time step unrolled


# --- repeated steps of the forward as a loop (emit/forward_loops.py) ---

def _recurrence(steps: int, older: bool = False) -> list[str]:
    """A recurrent layer's forward as the dispatcher-level trace unrolls it: per step the
    step's input (an item of an unbind), the state carried from the step before, an
    invariant weight; every step's output stacked at the end. ``older``: a step also
    reads the state of two steps back (not a loop's data flow)."""
    codes = ["t_xs = unbind(x)"] + [f"t_x_{k} = t_xs[{k}]" for k in range(steps)]
    h, c = "t_h0", "t_c0"
    codes += [f"{h} = zeros(x)", f"{c} = zeros(x)"]
    hs = []
    for k in range(steps):
        prev2 = hs[-2] if older and len(hs) >= 2 else h
        codes += [f"t_w_{k} = transpose(t_weight)", f"t_a_{k} = launch_f({h}, t_w_{k}, t_x_{k}, {prev2})",
                  f"t_c_{k}, t_h_{k} = launch_g(t_a_{k}, {c})"]
        h, c = f"t_h_{k}", f"t_c_{k}"
        hs.append(h)
    codes += [f"t_out = stack([{', '.join(hs)}])", f"return t_out, {c}, t_h_1"]
    return codes


def _run(codes: list[str]) -> Any:
    scope: dict[str, Any] = {
        "unbind": list, "total": lambda s: [sum(col) for col in zip(*s, strict=True)],
        "zeros": lambda x: [0.0] * len(x[0]), "transpose": lambda w: w[::-1], "stack": list,
        "launch_f": lambda h, w, x, h2: [a * b + c + d / 7 for a, b, c, d in zip(h, w, x, h2, strict=True)],
        "launch_g": lambda a, c: ([x + y for x, y in zip(a, c, strict=True)],
                                  [(x - y) / 3 for x, y in zip(a, c, strict=True)]),
    }
    src = "def forward(x, t_weight):\n" + "".join(f"    {line}\n" for line in codes)
    exec(src, scope)  # noqa: S102 - our own statements
    return scope["forward"]([[0.5, -1.0, 2.0]] * 6, [0.25, 1.5, -0.5])


def test_a_recurrence_becomes_one_loop_that_computes_the_same() -> None:
    codes = _recurrence(6)
    looped = roll(codes)
    assert _run(looped) == _run(codes)
    loops = [ln for ln in looped if ln.startswith("for ")]
    assert loops == ["for _step in range(6):"], looped
    body = "\n".join(looped)
    assert "t_xs[_step]" in body and "stack([*t_h_0_steps])" in body
    assert not any(re.match(r"t_x_\d+ = ", ln) for ln in looped)  # the loop reads the unbind itself
    assert len(roll(_recurrence(40))) == len(looped)  # the source does not grow with the steps


def test_steps_that_read_older_steps_are_not_rolled() -> None:
    codes = _recurrence(6, older=True)
    assert roll(codes) == codes
    assert roll(_recurrence(2)) == _recurrence(2)  # too few steps for a loop


def test_a_recurrent_candidate_is_judged_with_every_launch_counted(judge: Judge) -> None:
    """The evaluator's protocol (integrity checks, launch accounting at ``JITFunction.run``)
    on a candidate whose time steps are a loop inside the recurrent layer's launcher (the
    per-step loop: this layer's seed is the resident kernel): every step's launch is
    counted, one per layer and step (both directions in one launch)."""
    src = (EXAMPLES_DIR / "model_lstm_classifier.py").read_text()
    synth = OfflineSynthesizer()
    source, _, _ = synth.lower(synth.captured(src, "model_lstm_classifier"), {"g0.persistent": "off"})
    assert "for step in range(T):" in source
    verdict = judge.evaluate(src, source, "model_lstm_classifier")
    assert verdict.status == "correct", f"{verdict.status}: {verdict.reason}"
    launches = verdict.evidence["kernel_launches"]  # kernel name -> launches counted
    assert set(launches) <= set(re.findall(r"^def (\w+)\(", source, re.MULTILINE))
    layers, steps = 2, 7  # the spec's LAYERS and sequence length
    (step,) = [k for k in launches if k.endswith("_step")]
    (proj,) = [k for k in launches if k.endswith("_proj")]
    assert launches[step] == layers * steps, launches
    assert launches[proj] == layers, launches


def test_a_later_loop_that_reads_every_step_of_an_earlier_one_reads_its_list() -> None:
    """A second run whose every step collects all of the first run's step values (after the
    first loop, the first step's name holds the last step's value: the list is read)."""
    first = _recurrence(5)[:-2]
    hs = ", ".join(f"t_h_{k}" for k in range(5))
    second, z = [], "t_c0"
    for k in range(4):
        second += [f"t_s_{k} = stack([{hs}])", f"t_f_{k} = total(t_s_{k})",
                   f"t_z_{k}, t_y_{k} = launch_g(t_f_{k}, {z})"]
        z = f"t_z_{k}"
    codes = first + second + [f"return {z}, t_c_4"]
    looped = roll(codes)
    assert [ln for ln in looped if ln.startswith("for ")] == ["for _step in range(5):", "for _step1 in range(4):"]
    assert "    t_s_0 = stack([*t_h_0_steps])" in looped
    assert _run(looped) == _run(codes)
