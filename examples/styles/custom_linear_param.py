"""Style: a custom Linear with nn.Parameter(torch.empty(...)), kaiming_uniform_ reset_parameters() and F.linear."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super(Model, self).__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        bound = 1 / math.sqrt(self.in_features)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return F.relu(F.linear(x, self.weight, self.bias))


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [64, 32]
