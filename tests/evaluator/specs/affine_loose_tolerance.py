"""Test spec: y = x * 3 + 1 in float32 with a deliberately loose tolerance (error-budget tests)."""

import torch
import torch.nn as nn

KE_TOLERANCE = {"atol": 1e-2, "rtol": 1e-2}


class Model(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 3.0 + 1.0


def get_inputs():
    return [torch.randn(40, 300)]


def get_init_inputs():
    return []


def get_extra_inputs():
    # Odd sizes: a single element row, a non-multiple of any block size.
    return [[torch.randn(7, 3)], [torch.randn(1, 1031)]]
