"""GEMM with a bias + GELU + residual-scale epilogue: 131,072 x 8,192 activations (4 GiB) times 8,192 x 8,192."""

import torch
import torch.nn as nn
import torch.nn.functional as F

M = 131072
K = 8192
N = 8192


class Model(nn.Module):
    def __init__(self, in_features, out_features, alpha=0.5):
        super().__init__()
        self.fc = nn.Linear(in_features, out_features)
        self.alpha = alpha

    def forward(self, x):
        return F.gelu(self.fc(x)) * self.alpha


def get_inputs():
    return [torch.randn(M, K)]


def get_init_inputs():
    return [K, N]
