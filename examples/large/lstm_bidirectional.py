"""A 4-layer bidirectional LSTM, batch-first: 64 sequences of 512 steps x 1,024 features, last step projected."""

import torch
import torch.nn as nn

batch_size = 64
sequence_length = 512
input_size = 1024
hidden_size = 1024
num_layers = 4
output_size = 256


class Model(nn.Module):
    def __init__(self, input_size, hidden_size, num_layers, output_size, dropout=0.0):
        super(Model, self).__init__()  # noqa: UP008 - the common style on purpose
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True, dropout=dropout,
                            bidirectional=True)
        self.proj = nn.Linear(hidden_size * 2, output_size)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.proj(out[:, -1, :])


def get_inputs():
    return [torch.randn(batch_size, sequence_length, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size, 0.0]
