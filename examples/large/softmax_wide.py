"""Softmax over the last dimension of a 65,536 x 16,384 fp32 matrix (4 GiB)."""

import torch
import torch.nn as nn

batch_size = 65536
dim = 16384


class Model(nn.Module):
    """Row softmax, the form attention and classifier heads use."""

    def __init__(self):
        super(Model, self).__init__()  # noqa: UP008 - the common style on purpose

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    x = torch.randn(batch_size, dim)
    return [x]


def get_init_inputs():
    return []
