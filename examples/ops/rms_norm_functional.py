"""RMSNorm through F.rms_norm with a learned weight."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)

    def forward(self, x):
        return F.rms_norm(x, (x.shape[-1],), self.weight, eps=1e-5)


HIDDEN = 384


def get_inputs():
    return [torch.randn(50, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]


def get_extra_inputs():
    return [[torch.randn(3, HIDDEN)]]
