"""The pairwise dot-product interaction of a DLRM-style model: a bottom MLP embeds the
dense features, one embedding bag per sparse feature pools its ids, every pair of the
resulting vectors is multiplied (a batched Gram matrix), the strictly lower triangle of
each sample's Gram matrix is gathered with index buffers, concatenated with the dense
embedding and scored by a top layer."""

import torch
import torch.nn as nn

batch = 32
num_dense = 13
dim = 16
table_sizes = (100, 50, 70)
ids_per_table = 96


class Model(nn.Module):
    def __init__(self, num_dense, dim, table_sizes):
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(num_dense, 32), nn.ReLU(), nn.Linear(32, dim), nn.ReLU())
        self.tables = nn.ModuleList(nn.EmbeddingBag(n, dim, mode="sum") for n in table_sizes)
        n = len(table_sizes) + 1
        li, lj = torch.tril_indices(n, n, offset=-1)
        self.register_buffer("li", li)
        self.register_buffer("lj", lj)
        self.top = nn.Linear(dim + n * (n - 1) // 2, 1)

    def forward(self, dense, ids, offsets):
        x = self.bottom(dense)
        pooled = [bag(ids[k], offsets[k]) for k, bag in enumerate(self.tables)]
        t = torch.cat([x] + pooled, dim=1).view(x.shape[0], -1, x.shape[1])
        z = torch.bmm(t, t.transpose(1, 2))
        pairs = z[:, self.li, self.lj]
        return torch.sigmoid(self.top(torch.cat([x, pairs], dim=1)))


def _inputs(n, nnz):
    ids = torch.stack([torch.randint(0, size, (nnz,)) for size in table_sizes])
    starts = torch.sort(torch.randint(0, nnz + 1, (len(table_sizes), n - 1)), dim=1).values
    offsets = torch.cat([torch.zeros(len(table_sizes), 1, dtype=torch.int64), starts], dim=1)
    return [torch.randn(n, num_dense), ids, offsets]


def get_inputs():
    return _inputs(batch, ids_per_table)


def get_init_inputs():
    return [num_dense, dim, table_sizes]


def get_extra_inputs():
    return [_inputs(5, 11)]
