"""Style: an nn.CrossEntropyLoss criterion module held by Model, integer class targets."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, reduction="mean"):
        super(Model, self).__init__()
        self.criterion = nn.CrossEntropyLoss(reduction=reduction)

    def forward(self, logits, target):
        return self.criterion(logits, target)


def get_inputs():
    return [torch.randn(16, 12), torch.randint(0, 12, (16,))]


def get_init_inputs():
    return ["mean"]


def get_extra_inputs():
    return [[torch.randn(5, 12), torch.randint(0, 12, (5,))]]
