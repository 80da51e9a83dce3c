"""Scan: drawdown of a series from its running maximum, x - cummax(x)."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, prices):
        peak, _ = torch.cummax(prices, dim=-1)
        return (prices - peak) / peak.abs().clamp_min(1e-3)


def get_inputs():
    return [torch.randn(32, 150).cumsum(-1)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [[torch.randn(3, 13)]]
