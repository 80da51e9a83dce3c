"""Style: a loss with integer class targets from torch.randint, nll_loss(log_softmax(logits))."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, logits, target):
        return F.nll_loss(F.log_softmax(logits, dim=1), target)


def get_inputs():
    return [torch.randn(32, 20), torch.randint(0, 20, (32,))]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(7, 20), torch.randint(0, 20, (7,))]]
