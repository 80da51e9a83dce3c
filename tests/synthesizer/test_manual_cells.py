"""Hand-written recurrent cells (``frontend/manual_cells.py``): ``nn.Linear`` projections
and gate math looped over time steps are one recurrent node, lowered by the recurrent
family to one launch per layer (no per-step matmul), correct against the module in the
interpreter whatever the gate order, biases, step reads, initial state and split idiom;
anything that is not exactly the cell (an extra term, another activation, a peephole, a
gate in a wrong role, a normalisation, a middle cell state read elsewhere) keeps its
step-by-step lowering and is still correct. Odd sizes: batch 3, 7 input features, hidden
20 or 29, T = 1 and 5 (near misses 3)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import pytest

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.check import run_in_subprocess
from kernelevolve.ports.synthesis import Proposal, ProposalRequest

from .conftest import EXAMPLES_DIR


@dataclass(frozen=True)
class Cell:
    """One hand-written cell spec: ``order`` the names of the gate blocks as the user
    splits them (``ifgo`` is torch's), ``read`` how a step reads ``x``, ``state`` how the
    initial state is made, ``split`` how the gates are cut, ``mode`` lstm / rnn_tanh /
    rnn_relu, ``cat`` one Linear over ``cat([x, h])`` (``hx``: ``cat([h, x])``), ``tweak``
    a near miss (the name of a ``_TWEAKS`` entry)."""

    order: str = "ifgo"
    bias: tuple[bool, bool] = (True, False)
    read: str = "batch_first"  # batch_first x[:, t] | time_major x[t] | unbind0 | unbind1
    state: str = "new_zeros"  # new_zeros | zeros | inputs
    split: str = "chunk"  # chunk | split | slices
    hidden: int = 20
    steps: int = 5
    mode: str = "lstm"
    cat: str = ""  # "" | xh | hx
    tweak: str = ""


# near misses: (what is replaced, its replacement) in the generated LSTM's lines
_TWEAKS = {
    "forget_bias": ("torch.sigmoid(f) * c", "torch.sigmoid(f + 1.0) * c"),
    "relu_candidate": ("torch.tanh(g)", "torch.relu(g)"),
    "peephole": ("torch.sigmoid(i) *", "torch.sigmoid(i + self.w_ci * c) *"),
    "o_reused_as_i": ("torch.sigmoid(o) * torch.tanh(c)", "torch.sigmoid(i) * torch.tanh(c) + 0 * o"),
    "no_tanh_on_c": ("torch.sigmoid(o) * torch.tanh(c)", "torch.sigmoid(o) * c"),
    "layer_norm": ("gates = ", "gates = self.ln("),
    "every_c_read": ("outs.append(h)", "outs.append(h + c)"),
    "extra_term": ("h = torch.sigmoid(o)", "h = 0.5 * h + torch.sigmoid(o)"),
    "activations_swapped": ("torch.sigmoid(o) * torch.tanh(c)", "torch.tanh(o) * torch.sigmoid(c)"),
    "broadcast_state": ("h = x.new_zeros(x.size(0), H)", "h = x.new_zeros(1, H)"),
}


def _source(cell: Cell) -> str:
    h_dim = cell.hidden
    gates = 4 if cell.mode == "lstm" else 1
    time_dim = 1 if cell.read in ("batch_first", "unbind1") else 0
    shape = "B, T, IN_F" if time_dim else "T, B, IN_F"
    init = [f"        self.w_ih = nn.Linear(IN_F{' + H' if cell.cat else ''}, {gates} * H, bias={cell.bias[0]})"]
    if not cell.cat:
        init.append(f"        self.w_hh = nn.Linear(H, {gates} * H, bias={cell.bias[1]})")
    if cell.tweak == "peephole":
        init.append("        self.w_ci = nn.Parameter(torch.randn(H))")
    if cell.tweak == "layer_norm":
        init.append(f"        self.ln = nn.LayerNorm({gates} * H)")
    lstm = cell.mode == "lstm"
    args = "x, h, c" if lstm and cell.state == "inputs" else "x, h" if cell.state == "inputs" else "x"
    body = []
    if cell.state != "inputs":
        batch = f"x.size({1 - time_dim})"
        make = f"x.new_zeros({batch}, H)" if cell.state == "new_zeros" else f"torch.zeros({batch}, H)"
        body += [f"        h = {make}"] + ([f"        c = {make}"] if lstm else [])
    body.append("        outs = []")
    if cell.read.startswith("unbind"):
        body.append(f"        for xt in x.unbind({time_dim}):")
    else:
        body += [f"        for t in range(x.size({time_dim})):",
                 "            xt = x[:, t]" if time_dim else "            xt = x[t]"]
    if cell.cat:
        parts = "xt, h" if cell.cat == "xh" else "h, xt"
        body.append(f"            gates = self.w_ih(torch.cat([{parts}], 1))")
    else:
        body.append("            gates = self.w_ih(xt) + self.w_hh(h)")
    if lstm:
        names = ", ".join(cell.order)
        if cell.split == "chunk":
            body.append(f"            {names} = gates.chunk(4, dim=1)")
        elif cell.split == "split":
            body.append(f"            {names} = torch.split(gates, H, -1)")
        else:
            for k, name in enumerate(cell.order):
                start = f"{k} * H" if k else ""
                stop = f"{k + 1} * H" if k < 3 else ""
                body.append(f"            {name} = gates[:, {start}:{stop}]")
        body += ["            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)",
                 "            h = torch.sigmoid(o) * torch.tanh(c)"]
    else:
        body.append(f"            h = torch.{cell.mode[4:]}(gates)")
    body += ["            outs.append(h)",
             f"        return torch.stack(outs, {time_dim}), h" + (", c" if lstm else "")]
    text = "\n".join(body)
    if cell.tweak:
        old, new = _TWEAKS[cell.tweak]
        assert old in text, cell.tweak
        text = text.replace(old, new, 1)
        if cell.tweak == "layer_norm":
            text = text.replace("self.w_hh(h)\n", "self.w_hh(h))\n", 1)
    inputs = [f"torch.randn({shape})"]
    if cell.state == "inputs":
        inputs += ["torch.randn(B, H)"] * (2 if lstm else 1)
    return "\n".join([
        "import torch", "import torch.nn as nn", "",
        f"B, T, IN_F, H = 3, {cell.steps}, 7, {h_dim}", "", "",
        "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()", *init, "",
        f"    def forward(self, {args}):", text, "", "",
        "def get_inputs():", f"    return [{', '.join(inputs)}]", "", "",
        "def get_init_inputs():", "    return []", ""])


_BASE = Cell()
# recognised: every knob of the idiom moved at least once from the base
MATCHED: dict[str, Cell] = {
    "base": _BASE,
    "base_t1": replace(_BASE, steps=1),
    "order_ifog_hidden29": replace(_BASE, order="ifog", hidden=29),
    "order_figo_bias_hh_only": replace(_BASE, order="figo", bias=(False, True)),
    "order_ogfi_both_biases_t1": replace(_BASE, order="ogfi", bias=(True, True), steps=1),
    "no_bias_time_major": replace(_BASE, bias=(False, False), read="time_major"),
    "unbind0_zeros": replace(_BASE, read="unbind0", state="zeros", order="gifo"),
    "unbind1_state_inputs": replace(_BASE, read="unbind1", state="inputs", order="ifog"),
    "split_time_major_state_inputs": replace(_BASE, split="split", read="time_major", state="inputs"),
    "slices_ifog": replace(_BASE, split="slices", order="ifog", hidden=29),
    "slices_t1": replace(_BASE, split="slices", steps=1),
    "cat_xh": replace(_BASE, cat="xh", order="fiog"),
    "cat_hx_no_bias": replace(_BASE, cat="hx", bias=(False, False), read="time_major"),
    "rnn_tanh": replace(_BASE, mode="rnn_tanh", bias=(True, True)),
    "rnn_relu_state_inputs": replace(_BASE, mode="rnn_relu", state="inputs", read="unbind0", hidden=29),
    "rnn_tanh_cat_t1": replace(_BASE, mode="rnn_tanh", cat="xh", steps=1),
}
_STACKED = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.ModuleDict({"ih": nn.Linear(7, 80), "hh": nn.Linear(20, 80)})
        self.l2_ih = nn.Linear(20, 80)
        self.l2_hh = nn.Linear(20, 80, bias=False)

    def forward(self, x):
        h1 = c1 = h2 = c2 = x.new_zeros(x.size(0), 20)
        outs = []
        for t in range(x.size(1)):
            g = self.l1["ih"](x[:, t]) + self.l1["hh"](h1)
            f, i, o, gg = g.chunk(4, 1)
            c1 = torch.sigmoid(f) * c1 + torch.sigmoid(i) * torch.tanh(gg)
            h1 = torch.sigmoid(o) * torch.tanh(c1)
            g2 = self.l2_hh(h2) + self.l2_ih(h1)
            i2, f2, g2_, o2 = g2.chunk(4, 1)
            c2 = torch.sigmoid(i2) * torch.tanh(g2_) + c2 * torch.sigmoid(f2)
            h2 = torch.tanh(c2) * torch.sigmoid(o2)
            outs.append(h2)
        return torch.stack(outs, dim=1)


def get_inputs():
    return [torch.randn(3, 5, 7)]


def get_init_inputs():
    return []
"""
NEAR_MISSES: dict[str, Cell] = {name: replace(_BASE, tweak=name, steps=3) for name in _TWEAKS}


def _seed(source: str, name: str) -> Proposal:
    (prop,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=source, spec_name=name, count=1))
    return prop


def _example(steps: int) -> str:
    source = (EXAMPLES_DIR / "model_lstm_unrolled.py").read_text()
    return source.replace("torch.randn(4, 6, IN_F)", f"torch.randn(3, {steps}, IN_F)")


@pytest.fixture(scope="module")
def lowered() -> dict[str, tuple[str, Proposal, dict[str, Any]]]:
    """Every case's seed, checked against its reference in one interpreter subprocess."""
    specs = {name: _source(cell) for name, cell in {**MATCHED, **NEAR_MISSES}.items()}
    specs["example"] = _example(6)
    specs["example_t1"] = _example(1)
    specs["stacked"] = _STACKED
    props = {name: _seed(src, name) for name, src in specs.items()}
    results = run_in_subprocess([{"id": k, "spec_source": specs[k], "candidate_source": p.source, "seeds": [1, 2]}
                                 for k, p in props.items()])
    by_id = {r["id"]: r for r in results}
    return {k: (specs[k], p, by_id[k]) for k, p in props.items()}


def test_the_first_of_two_stacked_cells_is_a_loop_the_second_stays_step_by_step(
        lowered: dict[str, tuple[str, Proposal, dict[str, Any]]]) -> None:
    """The second cell reads the first one's h as its input: the first is one loop (its
    Linear layers in a ModuleDict, gates ``f, i, o, g``); the second, whose last step then
    reads the loop's final state rather than a step of a sequence, keeps its kernels."""
    _src, prop, result = lowered["stacked"]
    assert result["ok"], result
    forward = _forward(prop.source)
    assert forward.count("= launch_rnn_lstm_") == 1 and "self._modules['l1']" in forward, forward


def _kernels(source: str) -> list[str]:
    return re.findall(r"@triton\.jit\s+def (\w+)\(", source)


def _forward(source: str) -> str:
    return source[source.index("    def forward("):]


@pytest.mark.parametrize("name", [*MATCHED, "example", "example_t1"])
def test_a_hand_written_cell_over_time_is_one_recurrent_launch_and_correct(
        name: str, lowered: dict[str, tuple[str, Proposal, dict[str, Any]]]) -> None:
    _src, prop, result = lowered[name]
    assert result["ok"], result
    mode = MATCHED[name].mode if name in MATCHED else "lstm"
    forward = _forward(prop.source)
    assert forward.count(f"= launch_rnn_{mode}_") == 1, forward
    assert all(k.startswith("rnn_") or k.startswith("_") for k in _kernels(prop.source)), _kernels(prop.source)
    assert "for _step" not in forward


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_a_near_miss_keeps_its_step_by_step_lowering_and_is_correct(
        name: str, lowered: dict[str, tuple[str, Proposal, dict[str, Any]]]) -> None:
    src, prop, result = lowered[name]
    assert result["ok"], result
    assert "launch_rnn_" not in prop.source
    assert "manual_cells" not in OfflineSynthesizer().captured(src, name).rewrites


def test_the_gate_order_is_the_permutation_of_the_weight_blocks() -> None:
    """The launcher reads the Linear layers' blocks in torch's order: i, f, g, o of a
    forward that splits ``f, i, g, o`` are blocks 1, 0, 2, 3; torch's own order reads the
    weights as they are (no copy)."""
    prop = _seed(_source(replace(_BASE, order="figo")), "figo")
    assert "view(4, 20, -1)[[1, 0, 2, 3]]" in prop.source
    plain = _seed(_source(_BASE), "ifgo")
    assert "view(4" not in plain.source and "._parameters['weight'], " in plain.source


def test_the_captured_graph_holds_one_loop_node_and_no_cell_of_its_own() -> None:
    """The steps become calls of one ``ManualCell``, rolled into one loop node; the graph
    module keeps no ``ManualCell`` of its own (the loop holds it)."""
    synth = OfflineSynthesizer()
    spec = synth.captured(_source(_BASE), "base")
    assert spec.rewrites.get("manual_cells") == 1 and spec.rewrites.get("cell_loops") == 1, spec.rewrites
    names = [str(n.target) for n in spec.gm.graph.nodes if n.op == "call_module"]
    assert not any(n.startswith("_ke_manual_cell_") for n in names) and not hasattr(spec.gm, "_ke_manual_cell_0")
