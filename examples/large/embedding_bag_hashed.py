"""Double hashing into one embedding table at recommendation-model size: 524,288 raw
64-bit ids a batch (16,384 samples, 32 ids each) each probe two buckets of a 2**20 x 128
fp32 table (512 MiB), two multiplicative hashes apart, and a sample's embedding is the
mean of its bag under the first hash plus the mean under the second (fewer collisions
than one hash of the same table)."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_buckets = 1048576
dim = 128
batch = 16384
ids = 524288


class Model(nn.Module):
    def __init__(self, num_buckets, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(num_buckets, dim) * 0.01)

    def forward(self, raw_ids, offsets):
        n = self.weight.shape[0]
        first = torch.remainder((raw_ids * 2654435761) ^ (raw_ids >> 17), n)
        second = torch.remainder((raw_ids ^ (raw_ids >> 31)) * 40503 + 7, n)
        return F.embedding_bag(first, self.weight, offsets) + F.embedding_bag(second, self.weight, offsets)


def get_inputs():
    return [torch.randint(0, 2**40, (ids,)), torch.arange(batch) * (ids // batch)]


def get_init_inputs():
    return [num_buckets, dim]
