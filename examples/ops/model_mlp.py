"""Small MLP: Linear -> ReLU -> Linear -> GELU -> Linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int, out_f: int):
        super().__init__()
        self.fc1 = nn.Linear(in_f, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, out_f)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        h = F.gelu(self.fc2(h))
        return self.fc3(h)


IN_F, HIDDEN, OUT_F = 64, 96, 40


def get_inputs():
    return [torch.randn(32, IN_F)]


def get_init_inputs():
    return [IN_F, HIDDEN, OUT_F]


def get_extra_inputs():
    return [[torch.randn(5, IN_F)]]
