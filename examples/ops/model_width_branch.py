"""A head whose forward branches on the input's width in Python (wide features are projected down first) and scales by ``1/sqrt(x.shape[-1])``: the branch is decided by a shape, so a shape-specialised capture takes the branch the example shapes take."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, wide: int, narrow: int, classes: int):
        super().__init__()
        self.down = nn.Linear(wide, narrow)
        self.head = nn.Linear(narrow, classes)

    def forward(self, x):
        if x.shape[-1] > 64:
            x = F.silu(self.down(x))
        x = x * (1.0 / math.sqrt(x.shape[-1]))
        if x.dim() == 3:
            x = x.mean(dim=1)
        return torch.log_softmax(self.head(x), dim=-1)


WIDE, NARROW, CLASSES = 96, 40, 11


def get_inputs():
    return [torch.randn(6, 9, WIDE)]


def get_init_inputs():
    return [WIDE, NARROW, CLASSES]
