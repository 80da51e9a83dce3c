"""Small CNN classifier: conv -> relu -> conv -> relu -> global average pool -> flatten -> linear."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, classes: int):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.flat = nn.Flatten()
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        h = torch.relu(self.c1(x))
        h = torch.relu(self.c2(h))
        return self.fc(self.flat(self.gap(h)))


def get_inputs():
    return [torch.randn(4, 3, 16, 16)]


def get_init_inputs():
    return [10]


def get_extra_inputs():
    return [[torch.randn(2, 3, 11, 7)]]
