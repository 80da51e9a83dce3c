"""Pre-norm transformer block: LN -> single-head attention -> residual -> LN -> MLP -> residual."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, 2 * dim)
        self.fc2 = nn.Linear(2 * dim, dim)

    def forward(self, x):
        h = self.ln1(x)
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        attn = torch.softmax(q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1])), dim=-1)
        x = x + self.out(attn @ v)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


DIM = 32


def get_inputs():
    return [torch.randn(2, 24, DIM)]


def get_init_inputs():
    return [DIM]


def get_extra_inputs():
    return [[torch.randn(1, 7, DIM)]]
