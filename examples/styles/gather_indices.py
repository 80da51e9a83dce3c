"""Style: integer index input for torch.gather along the last dim, then a scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x, index):
        return torch.gather(x, -1, index) * 3.0


def get_inputs():
    return [torch.randn(8, 64), torch.randint(0, 64, (8, 16))]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 13), torch.randint(0, 13, (3, 5))]]
