"""Style: a helper class Block(nn.Module) using super(Block, self).__init__(), stacked by Model."""

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, dim):
        super(Block, self).__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.relu(self.fc(self.norm(x)))


class Model(nn.Module):
    def __init__(self, dim, depth):
        super(Model, self).__init__()
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(depth)])

    def forward(self, x):
        return self.blocks(x)


def get_inputs():
    return [torch.randn(4, 12, 64)]


def get_init_inputs():
    return [64, 2]
