"""Style: torch.nn.init calls in __init__ (xavier_uniform_ on weights, zeros_ on biases over self.modules())."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, dim, hidden, out_dim):
        super(Model, self).__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, out_dim)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def get_inputs():
    return [torch.randn(8, 64)]


def get_init_inputs():
    return [64, 128, 16]
