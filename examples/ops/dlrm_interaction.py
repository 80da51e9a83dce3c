"""The pairwise dot-product interaction of a DLRM-style model."""

# The pairwise dot-product interaction of a DLRM-style model: a bottom MLP embeds the
# dense features, one embedding bag per sparse feature pools its ids, every pair of the
# resulting vectors is multiplied (a batched Gram matrix), the strictly lower triangle of
# each sample's Gram matrix is gathered with index buffers, concatenated with the dense
# embedding and scored by a top layer.

import torch
import torch.nn as nn

BATCH = 32
NUM_DENSE = 13
DIM = 16
TABLE_SIZES = (100, 50, 70)
IDS_PER_TABLE = 96


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

    @staticmethod
    def _inputs(n, nnz):
        ids = torch.stack([torch.randint(0, size, (nnz,)) for size in TABLE_SIZES])
        starts = torch.sort(torch.randint(0, nnz + 1, (len(TABLE_SIZES), n - 1)), dim=1).values
        offsets = torch.cat([torch.zeros(len(TABLE_SIZES), 1, dtype=torch.int64), starts], dim=1)
        return [torch.randn(n, NUM_DENSE), ids, offsets]


def get_inputs():
    return Model._inputs(BATCH, IDS_PER_TABLE)


def get_init_inputs():
    return [NUM_DENSE, DIM, TABLE_SIZES]


def get_extra_inputs():
    return [Model._inputs(5, 11)]
