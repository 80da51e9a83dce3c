"""Dense features as categorical ones."""

# Dense features as categorical ones: each float feature is bucketized by fixed
# boundaries, the bucket index is shifted into that feature's block of an embedding table,
# and the looked-up rows are summed over the features of a sample.

import torch
import torch.nn as nn

BATCH = 64
NUM_FEATURES = 8
NUM_BUCKETS = 20
DIM = 16


class Model(nn.Module):
    def __init__(self, num_features, num_buckets, dim):
        super().__init__()
        self.register_buffer("boundaries", torch.linspace(-2.0, 2.0, num_buckets - 1))
        self.register_buffer("feature_offset", torch.arange(num_features) * num_buckets)
        self.emb = nn.Embedding(num_features * num_buckets, dim)

    def forward(self, x):
        buckets = torch.bucketize(x, self.boundaries)
        return self.emb(buckets + self.feature_offset).sum(dim=1)


def get_inputs():
    return [torch.randn(BATCH, NUM_FEATURES)]


def get_init_inputs():
    return [NUM_FEATURES, NUM_BUCKETS, DIM]


def get_extra_inputs():
    return [[torch.randn(3, NUM_FEATURES)]]
