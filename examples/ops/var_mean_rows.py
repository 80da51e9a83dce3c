"""Per-row variance and mean in one call, and the row's extremes."""

# Per-row variance and mean in one call, and the row's extremes: torch.var_mean and
# torch.aminmax each return two tensors, the forward returns all four.

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True)
        lo, hi = torch.aminmax(x, dim=-1)
        return var, mean, lo, hi


def get_inputs():
    return [torch.randn(64, 1000)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 33)]]
