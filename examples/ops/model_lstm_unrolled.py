"""Hand-written LSTM: the cell's two projections and gates in plain ops, looped over the time steps in Python (``for t in range(x.size(1))``), the hidden states stacked."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int):
        super().__init__()
        self.hidden = hidden
        self.w_ih = nn.Linear(in_f, 4 * hidden)
        self.w_hh = nn.Linear(hidden, 4 * hidden, bias=False)

    def forward(self, x):
        batch, steps, _ = x.shape
        h = x.new_zeros(batch, self.hidden)
        c = x.new_zeros(batch, self.hidden)
        outs = []
        for t in range(steps):
            gates = self.w_ih(x[:, t]) + self.w_hh(h)
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs, dim=1)


IN_F, HIDDEN = 18, 29


def get_inputs():
    return [torch.randn(4, 6, IN_F)]


def get_init_inputs():
    return [IN_F, HIDDEN]
