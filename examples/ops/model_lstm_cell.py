"""LSTM cell in plain ops: gates from two linears, returns (h', c')."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int):
        super().__init__()
        self.ih = nn.Linear(in_f, 4 * hidden)
        self.hh = nn.Linear(hidden, 4 * hidden)

    def forward(self, x, h, c):
        gates = self.ih(x) + self.hh(h)
        i, f, g, o = gates.chunk(4, dim=-1)
        c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_next = torch.sigmoid(o) * torch.tanh(c_next)
        return h_next, c_next


IN_F, HIDDEN = 48, 32


def get_inputs():
    return [torch.randn(16, IN_F), torch.randn(16, HIDDEN), torch.randn(16, HIDDEN)]


def get_init_inputs():
    return [IN_F, HIDDEN]


def get_extra_inputs():
    return [[torch.randn(3, IN_F), torch.randn(3, HIDDEN), torch.randn(3, HIDDEN)]]
