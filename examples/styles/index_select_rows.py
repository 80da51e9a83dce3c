"""Style: integer row indices for index_select on a float table, followed by relu."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, table, idx):
        return torch.relu(torch.index_select(table, 0, idx))


def get_inputs():
    return [torch.randn(100, 64), torch.randint(0, 100, (24,))]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(9, 17), torch.randint(0, 9, (5,))]]
