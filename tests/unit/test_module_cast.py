"""``kernelevolve.module_cast.converted``: a model run in float64 as itself. A deepcopy's
lambda attribute (a closure over a ModuleDict) kept calling the original float32
submodules, and the float64 reference raised; after the block the model is as it was."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

from kernelevolve.module_cast import converted


class LambdaMLP(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(d, 4 * d), act=nn.GELU(), c_proj=nn.Linear(4 * d, d)))
        self.bn = nn.BatchNorm1d(d)
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x + self.mlpf(x))


@pytest.mark.parametrize("rows, d", [(1, 1), (7, 33), (33, 7)])
def test_a_closure_over_submodules_runs_in_float64_and_the_model_is_restored(rows: int, d: int) -> None:
    torch.manual_seed(0)
    model = LambdaMLP(d)
    x = torch.randn(max(rows, 2), d)
    with pytest.raises(RuntimeError, match="dtype"):  # what the copy did
        copy.deepcopy(model).double()(x.double())
    with torch.no_grad():
        eager = model(x)  # training mode: updates the running statistics, as eager's run does
        before = {k: (v, v.clone()) for k, v in model.state_dict(keep_vars=True).items()}
        datas = {k: v.data.data_ptr() for k, v in model.named_parameters()}
        with converted(model, dtype=torch.float64) as m64:
            out = m64(x.double())
            assert all(p.dtype == torch.float64 for p in model.mlp.parameters())
    assert out.dtype == torch.float64
    torch.testing.assert_close(out.float(), eager, atol=1e-5, rtol=1e-4)
    after = model.state_dict(keep_vars=True)
    for k, (obj, value) in before.items():
        # The same objects, the same values: the float64 forward's running-stat updates are dropped.
        assert after[k] is obj and after[k].dtype == value.dtype and torch.equal(after[k], value), k
    assert {k: v.data.data_ptr() for k, v in model.named_parameters()} == datas


def test_shared_weights_stay_shared_and_a_raising_block_still_restores() -> None:
    lin = nn.Linear(5, 5)
    model = nn.Sequential(lin, nn.ReLU(), lin)
    weight = lin.weight.data
    with pytest.raises(ValueError), converted(model, dtype=torch.float64) as m64:
        assert m64[0].weight is m64[2].weight and m64[0].weight.dtype == torch.float64
        raise ValueError("the forward failed")
    assert lin.weight.dtype == torch.float32 and lin.weight.data.data_ptr() == weight.data_ptr()


def test_integer_buffers_keep_their_dtype() -> None:
    bn = nn.BatchNorm2d(3)
    with converted(bn, dtype=torch.float64) as m64:
        assert m64.num_batches_tracked.dtype == torch.int64 and m64.running_mean.dtype == torch.float64
    assert bn.running_mean.dtype == torch.float32
