"""Feature hashing into an embedding bag, the sparse lookup of a recommendation model."""

# Feature hashing into an embedding bag, the sparse lookup of a recommendation model:
# raw 64-bit ids are hashed (multiplicative hash, xor-shift) into a fixed number of buckets,
# and each sample's bag of hashed ids is pooled as a weighted sum of table rows (offsets
# mark where each sample's ids start; some samples have no ids).

import torch
import torch.nn as nn

NUM_BUCKETS = 1000
DIM = 16
BATCH = 64
IDS_PER_BATCH = 500


class Model(nn.Module):
    def __init__(self, num_buckets, dim):
        super().__init__()
        self.num_buckets = num_buckets
        self.bag = nn.EmbeddingBag(num_buckets, dim, mode="sum")

    def forward(self, raw_ids, offsets, weights):
        hashed = (raw_ids * 2654435761) ^ (raw_ids >> 17)
        buckets = torch.remainder(hashed, self.num_buckets)
        return self.bag(buckets, offsets, per_sample_weights=weights)

    @staticmethod
    def _bags(n_bags, n_ids):
        raw_ids = torch.randint(0, 2**40, (n_ids,))
        starts = torch.sort(torch.randint(0, n_ids + 1, (n_bags - 1,))).values
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64), starts])
        return [raw_ids, offsets, torch.rand(n_ids)]


def get_inputs():
    return Model._bags(BATCH, IDS_PER_BATCH)


def get_init_inputs():
    return [NUM_BUCKETS, DIM]


def get_extra_inputs():
    return [Model._bags(7, 33)]
