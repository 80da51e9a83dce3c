"""Transposed conv, global average kept as [N, C, 1, 1], plus a [C, 1, 1] bias.

The kept mean plus a bias of the keepdim shape once read the bias through the reduced
dims' column indices (`i2`, `i3`): a shape error in the interpreter, `i2 is not defined`
in the looped strategy's per-row epilogue."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, bias_shape):
        super().__init__()
        self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=2, padding=1)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = self.conv_transpose(x)
        x = x.mean(dim=(2, 3), keepdim=True) + self.bias
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(4, 3, 7, 9)]


def get_init_inputs():
    return [3, 5, 3, (5, 1, 1)]


def get_extra_inputs():
    return [[torch.randn(1, 3, 5, 2)]]
