"""Jagged sequence pooling at real size: 4,194,304 rows of 128 fp32 features (2 GiB)
split into 32,768 samples by offsets (128 rows each on average, cut at random points),
each sample's rows summed, then a ReLU."""

import torch
import torch.nn as nn

rows = 4194304
dim = 128
batch = 32768


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, values, offsets):
        return torch.relu(torch.segment_reduce(values, "sum", offsets=offsets))


def get_inputs():
    cuts = torch.sort(torch.randint(0, rows + 1, (batch - 1,))).values
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64), cuts, torch.full((1,), rows)])
    return [torch.randn(rows, dim), offsets]


def get_init_inputs():
    return []
