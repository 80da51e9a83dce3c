"""Swin-style windowed self-attention (7x7 windows, 4 heads, relative position bias) over 256 maps of 56x56x128."""

import torch
import torch.nn as nn

batch_size = 256
resolution = 56
embed_dim = 128
num_heads = 4
window_size = 7


class Model(nn.Module):
    def __init__(self, dim, window_size, num_heads):
        super().__init__()
        self.dim, self.window_size, self.num_heads = dim, window_size, num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.randn((2 * window_size - 1) ** 2, num_heads) * 0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(window_size), torch.arange(window_size), indexing="ij"))
        coords = coords.flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window_size - 1)
        self.register_buffer("rel_index", rel[..., 0] * (2 * window_size - 1) + rel[..., 1], persistent=False)

    def forward(self, x):
        b, h, w, c = x.shape
        ws = self.window_size
        win = x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        qkv = self.qkv(win).reshape(win.shape[0], ws * ws, 3, self.num_heads, c // self.num_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        attn = attn + self.bias_table[self.rel_index.reshape(-1)].reshape(ws * ws, ws * ws, -1).permute(2, 0, 1)
        out = (attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(win.shape[0], ws * ws, c)
        out = self.proj(out).view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        return out.reshape(b, h, w, c)


def get_inputs():
    return [torch.randn(batch_size, resolution, resolution, embed_dim)]


def get_init_inputs():
    return [embed_dim, window_size, num_heads]
