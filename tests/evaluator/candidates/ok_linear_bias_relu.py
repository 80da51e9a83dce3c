"""Correct: tiled matmul with tl.dot (IEEE fp32) and a fused bias + relu * 0.5 epilogue."""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _linear_relu(x_ptr, w_ptr, b_ptr, y_ptr, M, N, K,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        rk = k0 + tl.arange(0, BK)
        a = tl.load(x_ptr + rm[:, None] * K + rk[None, :], mask=(rm[:, None] < M) & (rk[None, :] < K), other=0.0)
        w = tl.load(w_ptr + rn[None, :] * K + rk[:, None], mask=(rn[None, :] < N) & (rk[:, None] < K), other=0.0)
        acc += tl.dot(a, w, input_precision="ieee")
    bias = tl.load(b_ptr + rn, mask=rn < N, other=0.0)
    y = tl.maximum(acc + bias[None, :], 0.0) * 0.5
    tl.store(y_ptr + rm[:, None] * N + rn[None, :], y, mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        m, k = x.shape
        n = self.linear.weight.shape[0]
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        grid = (triton.cdiv(m, 64), triton.cdiv(n, 128))
        _linear_relu[grid](x, self.linear.weight, self.linear.bias, y, m, n, k, BM=64, BN=128, BK=128)
        return y
