"""An MLP built from a list of widths: a ``for`` loop over an ``nn.ModuleList`` of Linear layers, with a residual connection wherever a layer keeps the width (decided in Python from the layers' shapes) and layer norm on the way out."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, widths: list[int]):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:]))
        self.norm = nn.LayerNorm(widths[-1])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            y = layer(x)
            if i < len(self.layers) - 1:
                y = F.gelu(y)
            if y.shape[-1] == x.shape[-1]:
                y = y + x
            x = y
        return self.norm(x)


WIDTHS = [29, 64, 64, 48, 48, 17]


def get_inputs():
    return [torch.randn(33, WIDTHS[0])]


def get_init_inputs():
    return [WIDTHS]
