"""Matmul with an epilogue: relu(x @ W^T + b) * 0.5."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x)) * 0.5


IN_FEATURES, OUT_FEATURES = 96, 80


def get_inputs():
    return [torch.randn(33, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]


def get_extra_inputs():
    return [[torch.randn(5, IN_FEATURES)]]
