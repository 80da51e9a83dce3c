"""GRU encoder with ``nn.GRUCell`` stepped over ``x.unbind(0)`` (time major, h0 given): all states and the last."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int):
        super().__init__()
        self.cell = nn.GRUCell(in_f, hidden)

    def forward(self, x, h0):
        h = h0
        outs = []
        for x_t in x.unbind(0):
            h = self.cell(x_t, h)
            outs.append(h)
        return torch.stack(outs), h


SEQ_LEN, BATCH, IN_F, HIDDEN = 5, 3, 11, 20


def get_inputs():
    return [torch.randn(SEQ_LEN, BATCH, IN_F), torch.randn(BATCH, HIDDEN)]


def get_init_inputs():
    return [IN_F, HIDDEN]
