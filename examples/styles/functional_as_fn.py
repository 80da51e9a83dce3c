"""Style: import torch.nn.functional as fn, Linear then fn.gelu and fn.layer_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as fn


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc = nn.Linear(dim, hidden)

    def forward(self, x):
        h = fn.gelu(self.fc(x))
        return fn.layer_norm(h, (h.shape[-1],))


def get_inputs():
    return [torch.randn(4, 12, 64)]


def get_init_inputs():
    return [64, 128]


def get_extra_inputs():
    return [[torch.randn(2, 5, 64)]]
