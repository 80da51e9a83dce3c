"""The dispatcher-level capture (aten_capture.py) maps aten graphs back to torch-level
ops: recurrent layers, in-place gate ops, factories and fused CPU attention become calls
the normaliser knows, on the inputs' device, and the graph computes what the module does."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from ke_synthesizer.offline.frontend.aten_capture import AtenCaptureError, aten_trace


class _Recurrent(nn.Module):
    def __init__(self, cls: type[nn.RNNBase], batch_first: bool) -> None:
        super().__init__()
        self.rnn = cls(5, 7, num_layers=2, batch_first=batch_first)
        self.mha = nn.MultiheadAttention(7, 1, batch_first=batch_first)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.rnn(x)[0]
        return self.mha(y, y, y, need_weights=False)[0] * torch.ones_like(y)


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU, nn.RNN])
@pytest.mark.parametrize("batch_first", [True, False])
def test_recurrent_graphs_are_torch_level_and_exact(cls: type[nn.RNNBase], batch_first: bool) -> None:
    torch.manual_seed(0)
    model = _Recurrent(cls, batch_first)
    x = torch.randn(3, 4, 5)
    gm = aten_trace(model, [x], ["x"])
    aten_calls = [n for n in gm.graph.nodes if isinstance(n.target, torch._ops.OpOverload)]
    assert aten_calls == []  # every op mapped, in-place gates (sigmoid_, add_) made pure
    assert any(n.target is torch.nn.functional.scaled_dot_product_attention for n in gm.graph.nodes)
    params = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
    assert "rnn.weight_hh_l1" in params  # the candidate reads its own parameters by name
    with torch.no_grad():
        torch.testing.assert_close(gm(x), model(x))


def test_factories_take_the_inputs_device() -> None:
    class Loop(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            acc = torch.zeros(x.shape[0], 3)
            for i in range(x.shape[1]):
                acc = acc + torch.zeros_like(acc) + x[:, i : i + 1]
            return acc

    gm = aten_trace(Loop(), [torch.randn(2, 5)], ["x"])
    for node in gm.graph.nodes:
        assert not any(isinstance(v, torch.device) for v in node.kwargs.values()), node.format_node()
    x = torch.randn(2, 5)
    torch.testing.assert_close(gm(x), Loop()(x))


def test_a_branch_on_values_is_refused() -> None:
    class Branch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2 if x.sum() > 0 else x

    with pytest.raises(AtenCaptureError, match="data-dependent|Guard"):
        aten_trace(Branch(), [torch.randn(3)], ["x"])
