"""Loss: Huber (smooth L1, delta=1) via F.huber_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, pred, target):
        return F.huber_loss(pred, target, delta=1.0)


def get_inputs():
    return [torch.randn(64, 100) * 2, torch.randn(64, 100) * 2]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 9), torch.randn(3, 9)]]
