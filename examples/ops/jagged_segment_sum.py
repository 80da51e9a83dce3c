"""Jagged sequence pooling."""

# Jagged sequence pooling: each sample owns a variable number of rows of a flat values
# tensor (lengths say how many, some are zero); the rows of each sample are summed and
# the pooled vectors go through a ReLU.

import torch
import torch.nn as nn

BATCH = 48
DIM = 24
MAX_LEN = 12


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, lengths):
        return torch.relu(torch.segment_reduce(values, "sum", lengths=lengths))

    @staticmethod
    def _jagged(n, d, longest):
        lengths = torch.randint(0, longest + 1, (n,))
        return [torch.randn(int(lengths.sum()), d), lengths]


def get_inputs():
    return Model._jagged(BATCH, DIM, MAX_LEN)


def get_init_inputs():
    return []


def get_extra_inputs():
    return [Model._jagged(7, 33, 3)]
