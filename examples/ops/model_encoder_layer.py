"""Text encoder head: a two-layer ``nn.TransformerEncoder`` (pre-norm, GELU, batch_first) over token features, mean-pooled over the sequence and projected to classes."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_model: int, heads: int, ff: int, layers: int, classes: int):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.0, activation="gelu", batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x):
        h = self.encoder(x)
        return self.head(h.mean(dim=1))


D_MODEL, HEADS, FF, LAYERS, CLASSES = 32, 4, 64, 2, 5


def get_inputs():
    return [torch.randn(3, 9, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, HEADS, FF, LAYERS, CLASSES]
