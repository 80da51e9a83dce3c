"""Style: @torch.no_grad() decorating forward, a Linear followed by L2 row normalization."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim, out_dim):
        super(Model, self).__init__()
        self.proj = nn.Linear(dim, out_dim)

    @torch.no_grad()
    def forward(self, x):
        return F.normalize(self.proj(x), dim=-1)


def get_inputs():
    return [torch.randn(16, 64)]


def get_init_inputs():
    return [64, 32]
