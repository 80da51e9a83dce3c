"""Loss: 1 - F.cosine_similarity(a, b, dim=-1), averaged."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return (1.0 - F.cosine_similarity(a, b, dim=-1)).mean()


def get_inputs():
    return [torch.randn(64, 96), torch.randn(64, 96)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 11), torch.randn(3, 11)]]
