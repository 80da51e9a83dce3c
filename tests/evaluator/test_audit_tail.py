"""The arithmetic audit's work on a deep whole model does not grow with its kernel count.

A default-initialised deep CNN (PyTorch's default init shrinks activations layer by layer)
ends in a classifier whose output hardly depends on what its first layers computed: with
the first computing launches' values replaced, the output is still correct, and the
economical pass (``arithmetic_audit.Economy``) fell back to the full audit, which analyses
every launch (a snapshot and two or more reruns each). A SqueezeNet-style seed timed out in
the run phase that way; measured here on 2 CPU cores (interpreter): 2 fire modules, 26
launches all analysed, integrity phase 2.4 s against 0.65 s economical. The launches nearest
the output decide first now (``Economy.start``), so the number analysed stays the same
whatever the depth; only when they decide nothing does the full audit run.
"""

from __future__ import annotations

import pytest

from ke_evaluator.judge import Judge
from ke_synthesizer.offline import OfflineSynthesizer
from kernelevolve.ports.synthesis import ProposalRequest

from .sources import example
from .test_audit_economy import DECOYS, RELU

SQUEEZE = '''
import torch
import torch.nn as nn


class Fire(nn.Module):
    def __init__(self, cin, squeeze, expand):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x):
        s = torch.relu(self.squeeze(x))
        return torch.cat([torch.relu(self.expand1(s)), torch.relu(self.expand3(s))], dim=1)


class Model(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.fires = nn.Sequential(*[Fire(16, 4, 8) for _ in range(FIRES)])
        self.classifier = nn.Conv2d(16, num_classes, 1)

    def forward(self, x):
        x = self.fires(self.pool(torch.relu(self.stem(x))))
        x = torch.relu(self.classifier(x))
        return torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)


def get_inputs():
    return [torch.randn(2, 3, 33, 33)]


def get_init_inputs():
    return [10]
'''


def _spec(fires: int) -> str:
    return f"FIRES = {fires}\n" + SQUEEZE


@pytest.mark.parametrize("fires", [7, 12])
def test_a_deep_model_whose_first_layers_wash_out_is_audited_on_a_bounded_number_of_launches(
        judge: Judge, fires: int) -> None:
    spec = _spec(fires)
    (proposal,) = OfflineSynthesizer().propose(ProposalRequest(spec_source=spec, spec_name="squeeze", count=1))
    verdict = judge.evaluate(spec, proposal.source, "squeeze")
    assert verdict.status == "correct", verdict.reason
    assert verdict.evidence["input_shapes"] == [[2, 3, 33, 33]]  # the shapes judged, stated on the verdict
    audit = verdict.evidence["kernel_arithmetic"]
    launches = sum(verdict.evidence["kernel_launches"].values())
    assert audit["launches"] == launches >= 3 * fires  # every fire module launches kernels of its own
    # The same few launches analysed at any depth (the full audit analysed all of them).
    assert audit["analysed"] <= 4 and audit["computed_values_reach_output"] is True, audit
    assert audit["audit"].startswith("economical"), audit


# four computing decoys, then a copy of the library's result: longer than the tail
MORE_DECOYS_THEN_COPY = DECOYS + '''
        d3 = torch.empty_like(x)
        _relu[grid](d2, d3, n, BLOCK=4096)
        d4 = torch.empty_like(x)
        _scale[grid](d3, d4, n, BLOCK=4096)
        h = (torch.relu(x) * 2.5 + self.bias).contiguous()
        y = torch.empty_like(h)
        _copy_mixed[grid](h, d1, d4, y, n, BLOCK=4096)
        return y
'''


def test_decoys_in_the_tail_too_still_go_to_the_full_audit_which_rejects(judge: Judge) -> None:
    """The tail pass only ever accepts: its decoys' values replaced, the copied library
    result is still correct, and the full audit decides as before."""
    v = judge.evaluate(example(RELU), MORE_DECOYS_THEN_COPY, candidate_id="more_decoys_copy")
    assert v.status == "rejected" and "do not reach the output" in v.reason, v.reason
    audit = v.evidence["kernel_arithmetic"]
    assert audit["audit"] == "full after the economical pass" and audit["analysed"] == audit["launches"] == 5
