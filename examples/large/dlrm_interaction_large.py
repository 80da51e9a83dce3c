"""A DLRM-style model at training-batch size: a 13 -> 512 -> 256 -> 128 bottom MLP on the
dense features, 8 embedding bags of 262,144 x 128 fp32 rows (1 GiB) pooling 16 ids a
sample, the dense and pooled vectors stacked per sample, their Gram matrix, its strictly
upper triangle picked from the flattened matrix by a precomputed index, and a two-layer
top MLP on the dense vector and the 36 interactions. Batch 8,192."""

import torch
import torch.nn as nn

batch = 8192
num_dense = 13
dim = 128
num_tables = 8
rows = 262144
pooling = 16


class Model(nn.Module):
    def __init__(self, num_dense, dim, num_tables, rows):
        super().__init__()
        layers = []
        for a, b in ((num_dense, 512), (512, 256), (256, dim)):
            layers += [nn.Linear(a, b), nn.ReLU()]
        self.bottom = nn.Sequential(*layers)
        self.bags = nn.ModuleList([nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(num_tables)])
        n = num_tables + 1
        rows_i, cols_i = torch.triu_indices(n, n, offset=1)
        self.register_buffer("pair_index", rows_i * n + cols_i)
        self.top = nn.Sequential(nn.Linear(dim + n * (n - 1) // 2, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, dense, ids, offsets):
        x = self.bottom(dense)
        vectors = torch.stack([x] + [bag(ids[k], offsets[k]) for k, bag in enumerate(self.bags)], dim=1)
        gram = torch.bmm(vectors, vectors.transpose(1, 2))
        pairs = gram.flatten(1).index_select(1, self.pair_index)
        return self.top(torch.cat([x, pairs], dim=1)).squeeze(1)


def get_inputs():
    ids = torch.randint(0, rows, (num_tables, batch * pooling))
    offsets = (torch.arange(batch) * pooling).expand(num_tables, batch).contiguous()
    return [torch.randn(batch, num_dense), ids, offsets]


def get_init_inputs():
    return [num_dense, dim, num_tables, rows]
