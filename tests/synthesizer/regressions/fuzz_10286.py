"""Fuzz case 10286 failed the synthesizer's own check, not the judge: a float16 layer norm of
nearly constant rows (rsqrt(softmax^2 + 1)) amplifies float16 rounding; eager was 0.066 from
float64, the candidate 0.053, 0.11 from eager (tolerance 0.01). The check now lets float64
decide such elements, as the evaluator does.

Generated case fuzz_10286: softmax -> unary -> layer_norm (float16).
"""

import torch
import torch.nn as nn

KE_TOLERANCE = {"atol": 0.01, "rtol": 0.01}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln3 = nn.LayerNorm([5, 17], elementwise_affine=True)
        self.to(torch.float16)

    def forward(self, x, y):
        t1 = x.softmax(dim=3)
        t2 = torch.rsqrt(t1 * t1 + 1.0)
        t4 = self.ln3(t2)
        return t4


def get_inputs():
    return [torch.randn(5, 5, 5, 17).to(torch.float16), torch.randn(1, 1, 1, 17).to(torch.float16)]


def get_init_inputs():
    return []


def get_extra_inputs():
    return [
        [torch.randn(7, 5, 5, 17).to(torch.float16), torch.randn(1, 1, 1, 17).to(torch.float16)],
        [torch.randn(17, 5, 5, 5).to(torch.float16).permute(3, 2, 1, 0), torch.randn(1, 1, 1, 17).to(torch.float16)],
    ]
