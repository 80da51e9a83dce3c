"""A reference made slow on purpose: relu(x) * 2.5 + bias one row at a time (a Python loop
of small ops, as a spec written for clarity can be). Its protocol outlasts a small fixed
run limit while each call stays a fraction of a second (test_phase_limits.py)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([torch.relu(x[i]) * 2.5 + self.bias for i in range(x.shape[0])])


ROWS, FEATURES = 4000, 8


def get_inputs():
    return [torch.randn(ROWS, FEATURES)]


def get_init_inputs():
    return [FEATURES]
