"""Style: self.apply(self._init_weights) in __init__, a helper method with nn.init.normal_ and constant_."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.ln = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.constant_(module.weight, 1.0)
            torch.nn.init.constant_(module.bias, 0.0)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


def get_inputs():
    return [torch.randn(4, 10, 64)]


def get_init_inputs():
    return [64, 256]
