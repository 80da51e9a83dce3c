"""Style: fully qualified torch.nn.functional.* and nn.functional.* calls, no F alias."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.fc = torch.nn.Linear(dim, dim)

    def forward(self, x):
        h = torch.nn.functional.elu(self.fc(x))
        return nn.functional.log_softmax(h, dim=-1)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64]
