"""Style: an MLP with nn.Dropout layers, put in eval mode by self.eval() at the end of __init__."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, hidden, p=0.5):
        super(Model, self).__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, hidden),
            nn.ReLU(),
            nn.Dropout(p),
            nn.Linear(hidden, dim),
            nn.Dropout(p),
        )
        self.eval()

    def forward(self, x):
        return self.net(x)


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 128, 0.5]
