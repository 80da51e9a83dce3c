"""Style: a boolean mask input beside float scores, masked_fill then softmax over the last dim."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, scores, mask):
        return torch.softmax(scores.masked_fill(~mask, -1e4), dim=-1)


def get_inputs():
    return [torch.randn(4, 16, 32), torch.rand(4, 16, 32) > 0.3]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(2, 3, 9), torch.rand(2, 3, 9) > 0.3]]
