"""Style: a @staticmethod helper on Model called as self.swish(x) from forward."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim):
        super(Model, self).__init__()
        self.fc = nn.Linear(dim, dim)

    @staticmethod
    def swish(x, beta=1.0):
        return x * torch.sigmoid(beta * x)

    def forward(self, x):
        return self.swish(self.fc(x), 1.5)


def get_inputs():
    return [torch.randn(8, 96)]


def get_init_inputs():
    return [96]
