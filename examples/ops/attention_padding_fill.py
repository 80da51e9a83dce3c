"""Encoder self-attention with a 0/1 attention-mask input per batch element:
scores.masked_fill(mask == 0, -1e9) before the softmax, as BERT-style encoders write it."""

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


def _mask(b, t):
    mask = (torch.rand(b, t) > 0.25).long()
    mask[:, 0] = 1
    return mask


def get_inputs():
    return [torch.randn(2, 29, 72), _mask(2, 29)]


def get_init_inputs():
    return [72, 2]


def get_extra_inputs():
    return [[torch.randn(3, 6, 72), _mask(3, 6)]]
