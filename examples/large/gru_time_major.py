"""A 3-layer bidirectional GRU, time-major (seq, batch, features), given its initial state: 1,024 x 32 x 512."""

import torch
import torch.nn as nn

SEQ_LEN = 1024
BATCH = 32
IN_FEATURES = 512
HIDDEN = 768
LAYERS = 3


class Model(nn.Module):
    def __init__(self, input_size: int, hidden_size: int, num_layers: int) -> None:
        super().__init__()
        self.gru = nn.GRU(input_size=input_size, hidden_size=hidden_size, num_layers=num_layers,
                          bidirectional=True)

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        out, h_n = self.gru(x, h0)
        return out.sum(dim=0) + h_n[-2:].transpose(0, 1).reshape(x.shape[1], -1)


def get_inputs():
    x = torch.randn(SEQ_LEN, BATCH, IN_FEATURES)
    h0 = torch.zeros(2 * LAYERS, BATCH, HIDDEN)
    return [x, h0]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN, LAYERS]
