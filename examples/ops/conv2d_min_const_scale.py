"""Conv2d, then an elementwise minimum with a constant made in the forward, a per-channel bias and a scale (the constant is a 0-d tensor, read as a literal)."""

# Conv2d, then an elementwise minimum with a constant made in the forward, a
# per-channel bias and a scale (the constant is a 0-d tensor, read as a literal).

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, cin: int, cout: int, ceiling: float, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel_size=3)
        self.ceiling = ceiling
        self.bias = nn.Parameter(torch.randn(cout, 1, 1) * 0.1)
        self.scale = scale

    def forward(self, x):
        x = self.conv(x)
        x = torch.min(x, torch.tensor(self.ceiling))
        x = x + self.bias
        return x * self.scale


def get_inputs():
    return [torch.randn(2, 3, 17, 21)]


def get_init_inputs():
    return [3, 10, 0.4, 2.0]


def get_extra_inputs():
    return [[torch.randn(1, 3, 5, 9)]]
