"""Log-softmax over the middle dim of a 3-D tensor."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.log_softmax(x, dim=1)


def get_inputs():
    return [torch.randn(8, 60, 50)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 13, 7)]]
