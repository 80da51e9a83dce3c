"""Encoder self-attention with a 0/1 mask per batch element: masked_fill(mask == 0, -1e9), BERT-style."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)

    def forward(self, x, attention_mask):
        b, t, c = x.shape
        d = c // self.n_heads
        q, k, v = self.qkv(x).view(b, t, 3, self.n_heads, d).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        scores = scores.masked_fill(attention_mask[:, None, None, :] == 0, -1e9)
        probs = nn.functional.softmax(scores, dim=-1)
        return torch.matmul(probs, v).transpose(1, 2).reshape(b, t, c)


def get_inputs():
    mask = (torch.rand(2, 29) > 0.25).long()
    mask[:, 0] = 1  # every sequence keeps its first token
    return [torch.randn(2, 29, 72), mask]


def get_init_inputs():
    return [72, 2]


def get_extra_inputs():
    mask = (torch.rand(3, 6) > 0.25).long()
    mask[:, 0] = 1
    return [[torch.randn(3, 6, 72), mask]]
