"""LSTM with ``nn.LSTMCell`` over ``x[:, t]``: every step's ``h`` stacked (batch first), a head on the last."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int, out_f: int):
        super().__init__()
        self.hidden = hidden
        self.cell = nn.LSTMCell(in_f, hidden)
        self.head = nn.Linear(hidden, out_f)

    def forward(self, x):
        h = x.new_zeros(x.size(0), self.hidden)
        c = torch.zeros_like(h)
        outs = []
        for t in range(x.size(1)):
            h, c = self.cell(x[:, t], (h, c))
            outs.append(h)
        return torch.stack(outs, dim=1), self.head(h)


BATCH, SEQ_LEN, IN_F, HIDDEN, OUT_F = 3, 9, 10, 20, 5


def get_inputs():
    return [torch.randn(BATCH, SEQ_LEN, IN_F)]


def get_init_inputs():
    return [IN_F, HIDDEN, OUT_F]
