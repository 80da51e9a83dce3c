"""Style: super(Model, self).__init__() with constructor arguments and a Linear layer."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.fc = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.fc(x))


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 96]
