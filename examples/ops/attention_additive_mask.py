"""Attention in plain ops with an additive float mask input (0 where allowed, -inf where not)
added to the scaled scores before the softmax, as relative-position and ALiBi-style biases are."""

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


def _bias(lq, lk):
    slope = -0.25 * (torch.arange(lq)[:, None] - torch.arange(lk)[None, :]).abs().float()
    return slope.masked_fill(torch.rand(lq, lk) < 0.2, float("-inf"))


def get_inputs():
    return [torch.randn(2, 4, 33, 40), torch.randn(2, 4, 50, 40), torch.randn(2, 4, 50, 40), _bias(33, 50)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(1, 2, 9, 40), torch.randn(1, 2, 5, 40), torch.randn(1, 2, 5, 40), _bias(9, 5)]]
