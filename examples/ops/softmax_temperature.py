"""Softmax of x / T over the last dim with a fixed temperature."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, temperature: float):
        super().__init__()
        self.temperature = temperature

    def forward(self, x):
        return torch.softmax(x / self.temperature, dim=-1)


def get_inputs():
    return [torch.randn(48, 1000)]


def get_init_inputs():
    return [0.7]


def get_extra_inputs():
    return [[torch.randn(5, 1500)]]
