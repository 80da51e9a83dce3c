"""A reference that keeps state on the module (``self.hidden = ...`` in its forward, as
people write recurrent cells) is judged call by call from the state ``__init__`` built
(``loading.hold_plain_state``): before, its answers drifted with every call the protocol
made and its state stayed float64 after the float64 run, so the offline synthesizer's
correct seed was judged ``runtime_error`` ("mat1 and mat2 must have the same dtype")."""

from __future__ import annotations

import pytest
import torch

from ke_evaluator.judge import Judge
from ke_evaluator.worker import loading
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest
from tests.synthesizer.test_every_spec_seeded import RNN_STATE


@pytest.mark.parametrize("batch,hidden", [(1, 1), (7, 33)])
def test_a_cell_with_state_on_the_module_is_judged_from_its_constructed_state(judge: Judge, batch: int,
                                                                              hidden: int) -> None:
    src = RNN_STATE.replace("BATCH", str(batch)).replace("HIDDEN", str(hidden))
    (seed,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=src, spec_name="rnn_state", count=1))
    v = judge.evaluate(src, seed.source, candidate_id="rnn_state")
    assert v.status == "correct", v.reason
    assert any("reassigns self.hidden" in w and "state __init__ built" in w for w in v.warnings), v.warnings


class _Stateful(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.ones(3)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.hidden = self.hidden + x  # the next call would see another state
        return self.hidden * 2


def test_every_call_starts_from_the_constructed_state() -> None:
    model = loading.build_model(_Stateful, [], seed=3, device=torch.device("cpu"))
    x = torch.arange(3.0)
    first, second = model(x), model(x)
    assert torch.equal(first, second) and torch.equal(first, (torch.ones(3) + x) * 2)
    assert loading.state_reassigned(model) == ["hidden"]
    plain = loading.build_model(torch.nn.Linear, [3, 3], seed=3, device=torch.device("cpu"))
    plain(x)
    assert loading.state_reassigned(plain) == [] and not plain._forward_pre_hooks  # nothing held, no hook
