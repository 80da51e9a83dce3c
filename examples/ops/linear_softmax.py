"""Classifier head: softmax(linear(x)) over the classes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, classes: int):
        super().__init__()
        self.head = nn.Linear(in_f, classes)

    def forward(self, x):
        return torch.softmax(self.head(x), dim=-1)


IN_F, CLASSES = 128, 50


def get_inputs():
    return [torch.randn(48, IN_F)]


def get_init_inputs():
    return [IN_F, CLASSES]


def get_extra_inputs():
    return [[torch.randn(3, IN_F)]]
