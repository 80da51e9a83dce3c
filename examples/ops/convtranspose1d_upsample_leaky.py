"""Vocoder-style 1-D upsampling: ConvTranspose1d (stride 4, kernel 8, padding 2) -> LeakyReLU(0.1)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Sequential(
            nn.ConvTranspose1d(16, 8, kernel_size=8, stride=4, padding=2),
            nn.LeakyReLU(0.1),
        )

    def forward(self, x):
        return self.up(x)


def get_inputs():
    return [torch.randn(2, 16, 37)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 16, 13)]]
