"""Stride-2 transposed convolution (a decoder's upsampling step): 2,048 x 128 x 64 x 64 in (4.3 GB)."""

import torch
import torch.nn as nn

batch_size = 2048
in_channels = 128
out_channels = 64
size = 64
kernel_size = 4
stride = 2
padding = 1


class Model(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.act = nn.LeakyReLU(0.2)

    def forward(self, x):
        return self.act(self.up(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, size, size)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]
