"""WaveNet-style gate: grouped dilated Conv1d(padding='same'), chunked into tanh(a) * sigmoid(b)."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(16, 32, 3, padding="same", dilation=2, groups=4)

    def forward(self, x):
        h = self.conv(x)
        a, b = h.chunk(2, dim=1)
        return torch.tanh(a) * torch.sigmoid(b)


def get_inputs():
    return [torch.randn(2, 16, 53)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 16, 17)]]
