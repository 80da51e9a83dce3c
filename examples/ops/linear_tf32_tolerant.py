"""Linear + silu with a loose declared tolerance, so TF32 dot products are allowed."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_f: int, out_f: int):
        super().__init__()
        self.fc = nn.Linear(in_f, out_f)

    def forward(self, x):
        return F.silu(self.fc(x))


IN_F, OUT_F = 96, 80
KE_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}
KE_ERROR_BUDGET = False  # the tolerance above is the bound: TF32's error is ~1e3x fp32's


def get_inputs():
    return [torch.randn(64, IN_F)]


def get_init_inputs():
    return [IN_F, OUT_F]


def get_extra_inputs():
    return [[torch.randn(7, IN_F)]]
