"""A SqueezeNet-style network: a strided stem, three fire modules (1x1 squeeze, then 1x1 and
3x3 expands concatenated, with the simple bypass where the widths agree), max pooling
between them and a 1x1 classifier conv kept per position (a global average left this small
net's output nearly independent of its input). A whole model of several kernels: the run
phase's work must not grow with their number."""

import torch
import torch.nn as nn


class Fire(nn.Module):
    def __init__(self, cin: int, squeeze: int, expand: int):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.expand1 = nn.Conv2d(squeeze, expand, 1)
        self.expand3 = nn.Conv2d(squeeze, expand, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.squeeze(x))
        out = torch.cat([torch.relu(self.expand1(s)), torch.relu(self.expand3(s))], dim=1)
        return out + x if out.shape[1] == x.shape[1] else out  # the simple-bypass variant


class Model(nn.Module):
    def __init__(self, num_classes: int):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.fire1 = Fire(16, 4, 8)
        self.fire2 = Fire(16, 4, 8)
        self.fire3 = Fire(16, 8, 16)
        self.classifier = nn.Conv2d(32, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(torch.relu(self.stem(x)))
        x = self.pool(self.fire2(self.fire1(x)))
        return torch.relu(self.classifier(self.fire3(x)))


NUM_CLASSES = 10


def get_inputs():
    return [torch.randn(2, 3, 33, 33)]


def get_init_inputs():
    return [NUM_CLASSES]


def get_extra_inputs():
    return [[torch.randn(1, 3, 17, 23)]]
