"""Style: helper classes using nn.Module.__init__(self) and super(self.__class__, self) inside Model."""

import torch
import torch.nn as nn


class ConvBNAct(nn.Module):
    def __init__(self, cin, cout):
        nn.Module.__init__(self)
        self.conv = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Head(nn.Module):
    def __init__(self, cin, classes):
        super(self.__class__, self).__init__()
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        return self.fc(x.mean(dim=(2, 3)))


class Model(nn.Module):
    def __init__(self, cin, width, classes):
        nn.Module.__init__(self)
        self.stem = ConvBNAct(cin, width)
        self.head = Head(width, classes)

    def forward(self, x):
        return self.head(self.stem(x))


def get_inputs():
    return [torch.randn(4, 3, 16, 16)]


def get_init_inputs():
    return [3, 16, 10]


def get_extra_inputs():
    return [[torch.randn(2, 3, 7, 9)]]
