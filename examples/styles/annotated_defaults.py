"""Style: type annotations and default arguments on __init__ and forward (a scaled LayerNorm)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim: int = 64, eps: float = 1e-5) -> None:
        super().__init__()
        self.norm: nn.LayerNorm = nn.LayerNorm(dim, eps=eps)
        self.dim: int = dim

    def forward(self, x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
        return self.norm(x) * scale


def get_inputs():
    return [torch.randn(4, 20, 64)]


def get_init_inputs():
    return []
