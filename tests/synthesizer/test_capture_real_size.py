"""Specs at real size are captured on fake tensors (real shapes, no data): nothing of the
spec's size is allocated or computed, the graph and every shape the planner reads are the
real ones, and a shape-specialised graph is fixed to the real shapes while its semantics are
checked on the shrunk spec (offline/README.md, *Capture at real size*)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.fx
import torch.nn as nn
from torch._subclasses.fake_tensor import FakeTensorMode

from ke_synthesizer.offline import OfflineSynthesizer
from ke_synthesizer.offline.frontend.capture import LARGE_BYTES, capture
from ke_synthesizer.offline.frontend.fake_rules import fake_module_output
from ke_synthesizer.offline.frontend.fx_meta import propagate_shapes, shape_of, tensor_meta
from kernelevolve.spec_shrink import rewrite, size_constants
from tests.bench_scripts import load_bench_script
from tests.conftest import REPO_ROOT

LARGE = REPO_ROOT / "examples" / "large"


def _source(name: str) -> str:
    return (LARGE / f"{name}.py").read_text()


@pytest.mark.parametrize("name", ["layernorm_large", "gemm_bias_gelu", "resnet50_bottleneck", "lstm_bidirectional",
                                  "gru_time_major"])
def test_large_spec_lowered_in_bounded_memory(name: str) -> None:
    """A child process lowers the seed of a real-size spec; its resident memory grows by far
    less than the spec's inputs and parameters (at real size it grew by several GB), and the
    4 GiB specs' whole child stays far below their input."""
    row = load_bench_script("capture_real_size").lower_one(LARGE / f"{name}.py", timeout_s=600)
    assert "error" not in row, row.get("error")
    size = row["input_bytes"] + row["param_bytes"]
    assert size > LARGE_BYTES
    assert row["rss_growth_mib"] * 2**20 < size / 4, row
    if row["input_bytes"] >= 2**30:
        assert row["peak_rss_mib"] * 2**20 < row["input_bytes"] / 4, row
    assert row["refused"] == 0  # the seed policy may still choose library convolutions


def _small(source: str, value: int = 64) -> str:
    """The same spec with every size constant set to ``value`` (under LARGE_BYTES)."""
    constants = size_constants(source)
    return rewrite(source, constants, {c.name: value for c in constants})


@pytest.mark.parametrize("name", ["layernorm_large", "gemm_bias_gelu", "pointwise_chain", "softmax_wide"])
def test_large_source_equals_small_source(name: str) -> None:
    """Where shapes do not enter the generated code (sizes are runtime arguments), the seed
    of the spec captured on fake tensors at real size is the seed of the same spec at a small
    size captured on real tensors, character for character."""
    synth = OfflineSynthesizer()
    large, small = _source(name), _small(_source(name))
    big = synth.captured(large, name)
    little = synth.captured(small, name)
    assert big.fake_mode is not None and little.fake_mode is None
    assert synth.lower(big, {})[0] == synth.lower(little, {})[0]


def test_real_shapes_reach_the_planner() -> None:
    """Every shape the planner reads is the real one: the graph was propagated on fake
    tensors of the spec's own shapes, never on shrunk ones."""
    spec = capture(_source("layernorm_large"), "layernorm_large")
    assert spec.tracer == "symbolic" and spec.fake_mode is not None
    shapes = {shape_of(n) for n in spec.gm.graph.nodes if shape_of(n) is not None}
    assert shapes == {(65536, 16384)}
    assert all(isinstance(x, torch._subclasses.fake_tensor.FakeTensor) for x in spec.inputs)
    assert all(isinstance(p, torch._subclasses.fake_tensor.FakeTensor) for p in spec.model.parameters())


def test_small_spec_captured_on_real_tensors() -> None:
    """Under LARGE_BYTES nothing changes: real inputs and parameters, as always."""
    spec = capture(_small(_source("layernorm_large")), "layernorm_small")
    assert spec.fake_mode is None
    assert not any(isinstance(x, torch._subclasses.fake_tensor.FakeTensor) for x in spec.inputs)


# int(x.shape[0]) refuses symbolic tracing: the shape tracer (3) takes it, at real shapes
SPECIALISED = """
import torch
import torch.nn as nn

{constants}

class Model(nn.Module):
    def forward(self, x):
        n = int(x.shape[0])
        return torch.softmax(x.reshape(n // 4, 4 * x.shape[1]), dim=-1) * 2.0


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
"""


def test_specialised_graph_keeps_real_shapes() -> None:
    """A shape-specialised graph is traced at the real shapes on fake tensors (a graph of
    the shrunk shapes would be wrong at real size) and taken because the same tracer's
    graph of the shrunk spec matches its reference forward."""
    source = SPECIALISED.format(constants="rows = 1048576\ncols = 128", shape="rows, cols")
    spec = capture(source, "specialised_large")
    assert spec.fake_mode is not None
    assert spec.tracer == "shapes"
    assert spec.specialized_shapes == [(1048576, 128)]
    shapes = {shape_of(n) for n in spec.gm.graph.nodes if shape_of(n) is not None}
    assert shapes == {(1048576, 128), (262144, 512)}
    src, _, fallbacks = OfflineSynthesizer().lower(spec, {})
    assert "[1048576, 128]" in src and "reshape(262144, 512)" in src and not fallbacks


def test_specialised_graph_with_inline_sizes_is_verified_on_smaller_inputs() -> None:
    """No size constant and no get_cpu_inputs(): the inputs' own sizes are shrunk (the
    same ops at the smaller shapes, spec_probe), and the specialised graph is verified on
    that spec, then kept at the real shapes."""
    spec = capture(SPECIALISED.format(constants="", shape="1048576, 128"), "specialised_inline")
    assert spec.tracer == "shapes" and spec.specialized_shapes == [(1048576, 128)]


def test_specialised_graph_without_shrunk_spec_is_not_trusted() -> None:
    """Sizes inline and a forward whose ops change with the size: no shrink keeps its
    graph, so there is no shrunk spec to verify a specialised graph on, and none is taken;
    the candidate is the reference forward, and it says why."""
    source = SPECIALISED.format(constants="", shape="1048576, 128").replace(
        "* 2.0", "* 2.0 if n > 2 ** 19 else torch.sigmoid(x)")
    spec = capture(source, "specialised_unshrinkable")
    assert spec.tracer == "library"
    assert "shrunk spec" in spec.library_reason


def test_fake_capture_leaves_rng_alone() -> None:
    """Capturing on fake tensors draws nothing from the caller's RNG (as on real ones)."""
    torch.manual_seed(123)
    before = torch.get_rng_state()
    capture(_source("gemm_bias_gelu"), "gemm_bias_gelu")
    assert torch.equal(before, torch.get_rng_state())


def test_every_large_spec_is_large() -> None:
    """examples/large all take the fake-tensor path (the threshold is not above them)."""
    from kernelevolve import spec_probe

    for path in sorted(Path(LARGE).glob("*.py")):
        size = spec_probe.measure(path.read_text(), forward=False)
        assert size.input_bytes + size.param_bytes > LARGE_BYTES, path.stem


_RECURRENT = """
import torch
import torch.nn as nn

batch = 8192
steps = 3
features = 256


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.randn(batch, steps, features)]


def get_init_inputs():
    return []
"""
# a hand-written loop over a constant number of time steps of a cell: one loop node
RECURRENT = _RECURRENT.format(init="self.cell = nn.GRUCell(features, 32)", body="""h = x.new_zeros(x.shape[0], 32)
        outs = []
        for t in range(steps):
            h = self.cell(x[:, t], h)
            outs.append(h)
        return torch.stack(outs, dim=1)""")
LAYER = _RECURRENT.format(init="self.rnn = nn.GRU(features, 32, batch_first=True)", body="return self.rnn(x)[0]")


def test_recurrent_cell_loop_is_one_node_at_real_shapes() -> None:
    """A recurrent cell in a Python loop over a constant number of steps: the symbolic
    graph's calls of the cell become one loop node (frontend/cell_loops.py; before, the
    dispatcher-level trace unrolled them), whose outputs on fake tensors come from sizes
    (CellLoop.fake_output), lowered by the recurrent family at the real batch."""
    spec = capture(RECURRENT, "gru_large")
    assert spec.fake_mode is not None
    assert spec.tracer == "symbolic" and spec.rewrites.get("cell_loops") == 1
    nodes = list(spec.gm.graph.nodes)
    assert shape_of(nodes[0]) == (8192, 3, 256)
    assert shape_of(nodes[-1].args[0]) == (8192, 3, 32)
    source, _, fallbacks = OfflineSynthesizer().lower(spec, {})
    assert "= launch_rnn_gru_" in source
    assert not [f for f in fallbacks if "cell" in str(f)], fallbacks


def test_recurrent_layer_stays_one_symbolic_node_at_real_size() -> None:
    """nn.GRU at real size: the symbolic graph keeps the layer as one node (no time step
    traced, no shrunk spec to verify on), and the recurrent family lowers it."""
    spec = capture(LAYER, "gru_layer_large")
    assert spec.fake_mode is not None and spec.tracer == "symbolic"
    assert [n.op for n in spec.gm.graph.nodes].count("call_module") == 1
    source, _, fallbacks = OfflineSynthesizer().lower(spec, {})
    assert not fallbacks and "= launch_rnn_gru_" in source


@pytest.mark.parametrize(("cls", "shape"), [(nn.BatchNorm1d, (4, 3)), (nn.BatchNorm1d, (4, 3, 5)),
                                            (nn.BatchNorm2d, (2, 3, 5, 7)), (nn.BatchNorm3d, (2, 3, 2, 5, 3))])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_outputs_on_fake_tensors_come_from_their_sizes(cls: type[nn.Module], shape: tuple[int, ...],
                                                                  training: bool) -> None:
    """fake_rules: a batch norm's output on fake tensors is made from its input's sizes (the
    decomposition costs ~70 ms a call there), as running it gives; an input the module
    refuses (channels, rank, one value per channel in training) gets no rule."""
    mod = cls(3).train(training)
    real = mod(torch.randn(shape))
    with FakeTensorMode() as mode:
        fake = fake_module_output(mod, (mode.from_tensor(torch.randn(shape)),))
        assert fake is not None and (fake.shape, fake.dtype) == (real.shape, real.dtype)
        wrong = (*shape[:1], 4, *shape[2:])
        assert fake_module_output(mod, (mode.from_tensor(torch.randn(wrong)),)) is None
        single = fake_module_output(mod, (mode.from_tensor(torch.randn(1, 3)),))
        assert (single is None) == (training or cls is not nn.BatchNorm1d)


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x))).mean(dim=(2, 3))


def test_propagating_only_new_nodes_gives_the_full_propagations_metadata() -> None:
    """After a rewrite of a graph on fake tensors only the nodes it added are run
    (``new_only``): every node's metadata is what a full propagation records."""
    gm = torch.fx.symbolic_trace(_Net())
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    inputs = [mode.from_tensor(torch.randn(2, 3, 9, 7))]
    propagate_shapes(gm, inputs, lambda: mode)
    relu = next(n for n in gm.graph.nodes if n.target is torch.relu)
    with gm.graph.inserting_before(relu):  # a rewrite: relu(bn) -> relu(bn * 2 + 1) as new nodes
        doubled = gm.graph.call_function(torch.mul, (relu.args[0], 2.0))
        shifted = gm.graph.call_function(torch.add, (doubled, 1.0))
    relu.args = (shifted,)
    gm.recompile()
    propagate_shapes(gm, inputs, lambda: mode, new_only=True)
    partial = {n.name: tensor_meta(n) for n in gm.graph.nodes}
    assert partial["mul"] is not None and partial["add"] is not None
    for n in gm.graph.nodes:
        n.meta.pop("tensor_meta", None)
    propagate_shapes(gm, inputs, lambda: mode)
    full = {n.name: tensor_meta(n) for n in gm.graph.nodes}
    assert partial == full
