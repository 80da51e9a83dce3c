"""LayerNorm over the last dimension with learned affine parameters."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


HIDDEN = 320


def get_inputs():
    return [torch.randn(4, 50, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]


def get_extra_inputs():
    return [[torch.randn(3, 17, HIDDEN)]]
