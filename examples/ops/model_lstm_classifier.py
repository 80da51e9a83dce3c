"""Sequence classifier: a two-layer ``nn.LSTM`` (batch_first) over token features, the last time step's hidden state through a linear head."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int, layers: int, classes: int):
        super().__init__()
        self.lstm = nn.LSTM(in_f, hidden, num_layers=layers, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        out, (h_n, c_n) = self.lstm(x)
        return self.fc(out[:, -1, :])


IN_F, HIDDEN, LAYERS, CLASSES = 24, 31, 2, 7


def get_inputs():
    return [torch.randn(5, 7, IN_F)]


def get_init_inputs():
    return [IN_F, HIDDEN, LAYERS, CLASSES]
