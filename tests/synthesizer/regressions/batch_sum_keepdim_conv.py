"""Sum over the batch kept as size 1, then a conv; example batch of one.

A reduction whose reduced dims all had extent 1 in the example took the full-size output
layout: the launcher allocated the output like its input, so a batch of three gave a
[3, C, H, W] result instead of [1, C, H, W]."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(11, 3, 3, padding=1)

    def forward(self, x):
        pooled = torch.sum(x, dim=0, keepdim=True)
        return self.conv(pooled)


def get_inputs():
    return [torch.randn(1, 11, 7, 5)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 11, 7, 5)]]
