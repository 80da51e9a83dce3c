"""Multi-head attention with a boolean key-padding mask [B, 1, 1, S] passed to F.scaled_dot_product_attention."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, n_heads: int):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, x, lengths_mask):
        b, t, c = x.shape
        h = x.view(b, t, self.n_heads, c // self.n_heads).transpose(1, 2)
        keep = lengths_mask[:, None, None, :]
        out = F.scaled_dot_product_attention(h, h, h, attn_mask=keep)
        return out.transpose(1, 2).reshape(b, t, c)


def get_inputs():
    lengths = torch.randint(1, 46, (3,))
    return [torch.randn(3, 45, 64), torch.arange(45)[None, :] < lengths[:, None]]


def get_init_inputs():
    return [2]


def get_extra_inputs():
    lengths = torch.randint(1, 8, (2,))
    return [[torch.randn(2, 7, 64), torch.arange(7)[None, :] < lengths[:, None]]]
