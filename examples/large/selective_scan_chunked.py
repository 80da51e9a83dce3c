"""A chunked selective scan (Mamba-style state space): 16 x 4,096 tokens x 1,024 channels, 16 states, chunks of 256."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch = 16
seq_len = 4096
d_model = 1024
d_state = 16
chunk_size = 256


class Model(nn.Module):
    def __init__(self, d_model, d_state, chunk_size):
        super().__init__()
        self.chunk_size = chunk_size
        self.in_proj = nn.Linear(d_model, 2 * d_model)
        self.x_proj = nn.Linear(d_model, 1 + 2 * d_state, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1).float()).repeat(d_model, 1))
        self.D = nn.Parameter(torch.ones(d_model))
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, u):
        b, length, d = u.shape
        x, z = self.in_proj(u).chunk(2, dim=-1)
        x = F.silu(x)
        dt, B, C = self.x_proj(x).split([1, self.x_proj.out_features // 2, self.x_proj.out_features // 2], dim=-1)
        dt = F.softplus(dt)  # (b, l, 1)
        A = -torch.exp(self.A_log)  # (d, n)
        state = x.new_zeros(b, d, A.shape[1])
        outs = []
        for start in range(0, length, self.chunk_size):
            sl = slice(start, start + self.chunk_size)
            dA = torch.exp(dt[:, sl, :, None] * A)  # (b, c, d, n)
            dBx = dt[:, sl, :, None] * B[:, sl, None, :] * x[:, sl, :, None]
            decay = torch.cumprod(dA, dim=1)
            within = torch.cumsum(dBx / decay.clamp_min(1e-30), dim=1) * decay
            states = within + decay * state[:, None]
            outs.append((states * C[:, sl, None, :]).sum(-1))
            state = states[:, -1]
        y = torch.cat(outs, dim=1) + x * self.D
        return self.out_proj(y * F.silu(z))


def get_inputs():
    return [torch.randn(batch, seq_len, d_model)]


def get_init_inputs():
    return [d_model, d_state, chunk_size]
