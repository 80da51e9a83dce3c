"""Seq2seq decoder: a 2-layer time-major ``nn.LSTM`` from a given ``(h0, c0)``, a vocabulary head, the final state."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, emb: int, hidden: int, layers: int, vocab: int):
        super().__init__()
        self.lstm = nn.LSTM(emb, hidden, num_layers=layers)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x, h0, c0):
        y, (h_n, c_n) = self.lstm(x, (h0, c0))
        return self.head(y), h_n, c_n


EMB, HIDDEN, LAYERS, VOCAB = 12, 27, 2, 41


def get_inputs():
    return [torch.randn(6, 5, EMB), torch.randn(LAYERS, 5, HIDDEN), torch.randn(LAYERS, 5, HIDDEN)]


def get_gpu_inputs():
    # Time-major: the batch is dimension 1, so a benchmark's generic batch scaling (which
    # repeats dimension 0) would lengthen the sequence instead; these are the GPU sizes.
    return [torch.randn(6, 1024, EMB), torch.randn(LAYERS, 1024, HIDDEN), torch.randn(LAYERS, 1024, HIDDEN)]


def get_init_inputs():
    return [EMB, HIDDEN, LAYERS, VOCAB]
