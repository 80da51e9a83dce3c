"""Functional batch norm in training mode with the running statistics and the affine parameters passed in (as a functional model or a hand-rolled training step holds them)."""

# Functional batch norm in training mode with the running statistics and the affine
# parameters passed in (as a functional model or a hand-rolled training step holds them):
# F.batch_norm(x, running_mean, running_var, weight, bias, training=True) on [N, C, L].

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x, running_mean, running_var, weight, bias):
        return F.batch_norm(x, running_mean, running_var, weight, bias, training=True, momentum=0.1, eps=1e-5)


def get_inputs():
    c = 12
    return [torch.randn(6, c, 50) * 2.0 + 1.0, torch.zeros(c), torch.ones(c), 1.0 + 0.1 * torch.randn(c),
            0.1 * torch.randn(c)]


def get_init_inputs():
    return []


def get_extra_inputs():
    c = 12
    return [[torch.randn(3, c, 7), torch.zeros(c), torch.ones(c), torch.randn(c), torch.randn(c)]]
