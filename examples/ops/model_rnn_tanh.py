"""Elman RNN: two-layer ``nn.RNN`` (tanh, batch_first) whose summed hidden states over time feed a ReLU projection."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int, out_f: int):
        super().__init__()
        self.rnn = nn.RNN(in_f, hidden, num_layers=2, nonlinearity="tanh", batch_first=True)
        self.proj = nn.Linear(hidden, out_f)

    def forward(self, x):
        out, _ = self.rnn(x)
        return torch.relu(self.proj(out.sum(dim=1)))


IN_F, HIDDEN, OUT_F = 16, 37, 12


def get_inputs():
    return [torch.randn(4, 6, IN_F)]


def get_init_inputs():
    return [IN_F, HIDDEN, OUT_F]
