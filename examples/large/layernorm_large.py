"""LayerNorm with learned affine over 16,384 features, 65,536 rows (4 GiB of fp32)."""

import torch
import torch.nn as nn

BATCH = 65536
FEATURES = 16384
EPS = 1e-5


class Model(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super(Model, self).__init__()  # noqa: UP008 - the common style on purpose
        self.ln = nn.LayerNorm(normalized_shape, eps=eps)

    def forward(self, x):
        return self.ln(x)


def get_inputs():
    return [torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [(FEATURES,), EPS]
