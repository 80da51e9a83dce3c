"""Conv3d, mean over the depth kept as size 1, plus a per-channel bias.

Same keepdim-broadcast bug as convtranspose2d_mean_keepdim_bias: the bias has extent 1
along the reduced depth, which was read through the depth's column index."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv3d(3, 4, kernel_size=3, padding=1)
        self.bias = nn.Parameter(torch.zeros(1, 4, 1, 1, 1) + 0.1)

    def forward(self, x):
        x = torch.relu(self.conv(x))
        return x.mean(dim=2, keepdim=True) + self.bias


def get_inputs():
    return [torch.randn(2, 3, 6, 5, 3)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 3, 2, 3, 7)]]
