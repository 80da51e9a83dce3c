"""3x3 convolution + bias + ReLU on a batch of 512 64-channel 224x224 feature maps (6.6 GB)."""

import torch
import torch.nn as nn

batch_size = 512
in_channels = 64
out_channels = 64
height = 224
width = 224
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
