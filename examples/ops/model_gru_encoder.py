"""Encoder: one-layer ``nn.GRU`` in time-major layout (batch_first=False) with an explicit initial hidden state; returns the whole output sequence and the final state."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_f: int, hidden: int):
        super().__init__()
        self.gru = nn.GRU(in_f, hidden)

    def forward(self, x, h0):
        out, h_n = self.gru(x, h0)
        return out, h_n


IN_F, HIDDEN = 20, 23


def get_inputs():
    return [torch.randn(7, 3, IN_F), torch.randn(1, 3, HIDDEN)]


def get_gpu_inputs():
    # Time-major: the batch is dimension 1, so a benchmark's generic batch scaling (which
    # repeats dimension 0) would lengthen the sequence instead; these are the GPU sizes.
    return [torch.randn(7, 2048, IN_F), torch.randn(1, 2048, HIDDEN)]


def get_init_inputs():
    return [IN_F, HIDDEN]
