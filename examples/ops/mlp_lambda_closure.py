"""A transformer-style MLP held as a lambda attribute: ``self.mlpf`` closes over a
ModuleDict (``c_fc``, ``act``, ``c_proj``), so the forward reaches the submodules only through
the closure. The evaluator must run the reference as it is built; a copy of the model
(``copy.deepcopy``) keeps the lambda pointing at the original submodules."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n_embd: int):
        super().__init__()
        self.ln = nn.LayerNorm(n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc=nn.Linear(n_embd, 4 * n_embd),
            act=nn.GELU(approximate="tanh"),
            c_proj=nn.Linear(4 * n_embd, n_embd),
        ))
        m = self.mlp
        self.mlpf = lambda x: m.c_proj(m.act(m.c_fc(x)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlpf(self.ln(x))


N_EMBD = 48


def get_inputs():
    return [torch.randn(2, 17, N_EMBD)]


def get_init_inputs():
    return [N_EMBD]


def get_extra_inputs():
    return [[torch.randn(1, 5, N_EMBD)]]
