"""Plain-op attention with an additive float mask input (0 keeps, -inf drops), as ALiBi-style biases are added."""

import math

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, q, k, v, bias):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        scores = scores + bias
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    lq, lk = 33, 50
    bias = -0.25 * (torch.arange(lq)[:, None] - torch.arange(lk)[None, :]).abs().float()
    bias = bias.masked_fill(torch.rand(lq, lk) < 0.2, float("-inf"))
    return [torch.randn(2, 4, lq, 40), torch.randn(2, 4, lk, 40), torch.randn(2, 4, lk, 40), bias]


def get_init_inputs():
    return []


def get_extra_inputs():
    lq, lk = 9, 5
    bias = -0.25 * (torch.arange(lq)[:, None] - torch.arange(lk)[None, :]).abs().float()
    bias = bias.masked_fill(torch.rand(lq, lk) < 0.2, float("-inf"))
    return [[torch.randn(1, 2, lq, 40), torch.randn(1, 2, lk, 40), torch.randn(1, 2, lk, 40), bias]]
